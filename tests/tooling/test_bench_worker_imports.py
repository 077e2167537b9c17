"""`kindling worker` starts like the handler: its command line imports only what its path uses.

The cold-start benchmark (infra/bench/run.py, ``kindling worker --valkey``) measures the
whole start; this keeps the modules it removed from coming back.
"""

import subprocess
import sys

from kindling.tools import cli

ARGV = ["worker", "--valkey", "redis://127.0.0.1:1/0", "--tasks", "tasks.py", "--burst", "--concurrency", "8"]


def test_the_worker_parser_reads_the_same_namespace_as_the_full_one():
    assert vars(cli.parser("worker").parse_args(ARGV)) == vars(cli.parser().parse_args(ARGV))


def test_the_worker_command_line_imports_no_pathlib_shutil_subprocess_or_other_commands():
    code = (
        "import sys\n"
        "from kindling.tools import cli\n"
        f"cli.parser('worker').parse_args({ARGV!r})\n"
        "print(' '.join(sorted(m for m in ('pathlib', 'shutil', 'subprocess', 'kindling.tools.ops',"
        " 'kindling.tools.ops.cli')"
        " if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}\n" + code],
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
