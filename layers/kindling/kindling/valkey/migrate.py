"""Moved to :mod:`kindling.tools.valkey_migrate`.

``kindling.valkey.migrate`` stays for the code that imports it.
"""

if __name__ == "__main__":  # python -m kindling.valkey.migrate
    import runpy

    runpy.run_module("kindling.tools.valkey_migrate", run_name="__main__", alter_sys=True)
else:
    from kindling.tools.valkey_migrate import *  # noqa: F403
