# quickstart.py: a task, a job sent to it, its result; run inline by eager mode
from kindling import task
from kindling.testing import eager


@task                                   # its name: module.qualname ("quickstart.add")
def add(x: int, y: int) -> int:
    return x + y


def test_add():
    with eager() as jobs:               # no queue, no table: the worker's runner, inline
        handle = add.delay(2, 3)        # what a producer does on SQS or Valkey
        assert handle.result() == 5     # what a caller reads back
        assert handle.status() == "succeeded"
        assert jobs.records[handle.id]["attempts"] == 1


if __name__ == "__main__":
    test_add()
    print("ok")
