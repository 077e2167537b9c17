"""The harness's Lambda CPU-share emulation (infra/bench/cpushare.py), on a fake cgroup tree."""

import importlib.util
import os
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "infra" / "bench" / "cpushare.py"
_spec = importlib.util.spec_from_file_location("bench_cpushare", _PATH)
cpushare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cpushare)


def test_quota_is_the_period_share_of_one_vcpu():
    assert cpushare.quota_us(1769) == cpushare.PERIOD_US
    assert cpushare.quota_us(128) == round(14_000 * 128 / 1769) == 1013
    assert cpushare.quota_us(512, 10_000) == 2894


def test_quota_below_the_kernel_minimum_is_refused():
    with pytest.raises(ValueError, match="below the kernel"):
        cpushare.quota_us(128, 10_000)


def _v1(tmp_path):
    root = tmp_path / "cpu"
    root.mkdir()
    (root / "cpu.cfs_quota_us").write_text("-1")
    return root


def test_v1_group_gets_period_then_quota(tmp_path):
    root = _v1(tmp_path)
    share = cpushare.CpuShare.create(512, v1_root=root, v2_roots=(), name="g")
    assert share.kind == "v1"
    assert (root / "g" / "cpu.cfs_period_us").read_text() == "14000"
    assert (root / "g" / "cpu.cfs_quota_us").read_text() == str(round(14_000 * 512 / 1769))
    assert "0.289 CPU" in share.describe()


def test_v2_group_uses_cpu_max_and_enables_the_controller(tmp_path):
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids")
    (root / "cgroup.subtree_control").write_text("")
    share = cpushare.CpuShare.create(1769, v1_root=tmp_path / "none", v2_roots=(root,), name="g")
    assert share.kind == "v2"
    assert (root / "g" / "cpu.max").read_text() == "14000 14000"
    assert (root / "cgroup.subtree_control").read_text() == "+cpu"


def test_no_controller_is_a_clear_error(tmp_path):
    with pytest.raises(cpushare.CgroupUnavailable, match="no writable cgroup cpu controller"):
        cpushare.CpuShare.create(128, v1_root=tmp_path / "none", v2_roots=(tmp_path / "none2",))


def test_join_writes_own_pid_and_remove_deletes_the_group(tmp_path):
    root = _v1(tmp_path)
    share = cpushare.CpuShare.create(1024, v1_root=root, v2_roots=(), name="g")
    (share.path / "cgroup.procs").write_text("")
    share.join()
    assert (share.path / "cgroup.procs").read_text() == str(os.getpid())
    for f in share.path.iterdir():  # a real cgroup directory is removed with its files in place
        f.unlink()
    share.remove()
    assert not share.path.exists()
    share.remove()  # already gone: no error
