"""`kindling worker` starts like the handler: its command line imports only what its path uses.

The cold-start benchmark (infra/bench/run.py, ``kindling worker --valkey``) measures the
whole start; this keeps the modules it removed from coming back.
"""


from kindling.tools import cli

ARGV = ["worker", "--valkey", "redis://127.0.0.1:1/0", "--tasks", "tasks.py", "--burst", "--concurrency", "8"]


def test_the_worker_parser_reads_the_same_namespace_as_the_full_one():
    assert vars(cli.parser("worker").parse_args(ARGV)) == vars(cli.parser().parse_args(ARGV))
