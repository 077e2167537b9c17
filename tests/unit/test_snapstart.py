"""SnapStart's hooks: registered only for the init a snapshot is taken of, and only through
the managed runtime's ``snapshot_restore_py``; what they reset. (The restore itself, with
sockets: tests/service/test_snapstart_restore.py.)"""

from __future__ import annotations

import subprocess
import sys


def test_after_a_restore_cached_credentials_are_read_again(monkeypatch):
    from kindling.drivers.aws import chain
    from kindling.drivers.aws.temporary import Credentials
    from kindling.shared import snapstart

    reads = []

    def resolve(deadline=None):
        reads.append(deadline)
        return Credentials("AK", "SK")

    monkeypatch.setattr(chain, "resolve", resolve)
    chain.reset()
    chain.get()
    chain.get()
    assert len(reads) == 1  # cached
    snapstart.after_restore()
    chain.get()
    assert len(reads) == 2
    chain.reset()


def test_after_a_restore_random_is_reseeded_only_if_something_imported_it():
    script = """
import sys
from kindling.shared import snapstart
snapstart.after_restore()
print("random" in sys.modules)
import random
random.seed(7)
first = random.random()
random.seed(7)
snapstart.after_restore()
print(random.random() != first)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_restored_copies_drain_as_valkey_consumers_of_their_own(monkeypatch):
    """A restored copy's environment is the snapshot's: the log stream's name (a drain's
    consumer name) would be every copy's. After a restore it carries a tag of this copy's."""
    from kindling.shared import snapstart
    from kindling.triggers.valkey import lambda_drain

    monkeypatch.setattr(snapstart, "restore_tag", "", raising=False)
    monkeypatch.setenv("AWS_LAMBDA_LOG_STREAM_NAME", "2026/11/28/[7]abc")
    assert lambda_drain.consumer_name(None) == "2026/11/28/[7]abc"
    assert lambda_drain.consumer_name("handed-on") == "handed-on"  # a drain handing on names its own
    snapstart.after_restore()
    one = lambda_drain.consumer_name(None)
    snapstart.after_restore()
    other = lambda_drain.consumer_name(None)
    assert one.startswith("2026/11/28/[7]abc-") and other.startswith("2026/11/28/[7]abc-") and one != other
    assert lambda_drain.consumer_name("handed-on") == "handed-on"
