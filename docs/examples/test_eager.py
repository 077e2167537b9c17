from kindling.testing import eager
from tasks import resize


def test_resize():
    with eager() as jobs:
        handle = resize.delay("a.png", width=64)
        assert handle.result() == "thumbs/a.png"
        assert jobs.records[handle.id]["attempts"] == 1


if __name__ == "__main__":
    test_resize()
