"""Time and retries are values: a remaining time is computed only by ``Budget``
(kindling.core.batch), a retry's attempts and waits only by ``Retry`` (kindling.core.policy).

Held by reading the package: Lambda's remaining-time callback and the safety margins appear in
no other module, no loop elsewhere sleeps between tries (a wait that is not a retry is listed
with its reason), and no other module writes an exponential backoff."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "layers/kindling/kindling"
BUDGET = "core/batch.py"
RETRY = "core/policy.py"

WAITS = {  # (module, function): why its loop sleeps without being a retry loop
    ("shared/sqs_send.py", "_send_batch"): "sleeps through the caller's pause (backoff_sleep: a Retry)",
    ("triggers/valkey/worker.py", "_pause"): "a Pauses value's pause on a Budget, cut in 50 ms steps for SIGTERM",
    ("producer/handles.py", "wait"): "polls for an outcome, 20 ms doubling to 1 s, on the module's own clock",
    ("tools/ops/dlq.py", "_move_task"): "follows a message move task at a fixed interval (an operator's command)",
}
MARGINS = {"safety_ms", "cutoff_ms"}


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text())


def functions(tree):
    """(enclosing function name, node) for every node, nested functions counted as their own."""
    def walk(node, owner):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else owner
            yield name, child
            yield from walk(child, name)
    yield from walk(tree, "<module>")


def named(node) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def sleeps_in(loop) -> bool:
    """Whether a loop's own body (not a function defined in it) calls a ``sleep``."""
    stack = list(loop.body) + list(loop.orelse)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call) and named(node.func) == "sleep":
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def test_lambdas_remaining_time_is_read_only_by_the_budget():
    found = [f"{name}:{node.lineno}" for name, tree in modules() if name != BUDGET for node in ast.walk(tree)
             if named(node) == "get_remaining_time_in_millis"
             or (isinstance(node, ast.Constant) and node.value == "get_remaining_time_in_millis")]
    assert not found, "ask Budget.remaining_of / Budget.started instead:\n" + "\n".join(found)


def test_the_safety_margins_are_divided_only_by_the_budget():
    found = [f"{name}:{node.lineno}" for name, tree in modules() if name != BUDGET for node in ast.walk(tree)
             if isinstance(node, ast.BinOp) and {named(node.left), named(node.right)} & MARGINS]
    assert not found, "a margin cut by hand; give the Budget a method for it:\n" + "\n".join(found)


def test_no_loop_sleeps_between_tries_outside_the_retry_value():
    found = []
    for name, tree in modules():
        if name == RETRY:
            continue
        for owner, node in functions(tree):
            if isinstance(node, ast.For | ast.While) and sleeps_in(node) and (name, owner) not in WAITS:
                found.append(f"{name}:{node.lineno} ({owner})")
    assert not found, "a hand-written retry loop; wait through a kindling.core.policy.Retry:\n" + "\n".join(found)


def test_no_exponential_backoff_is_written_outside_the_retry_rules():
    found = [f"{name}:{node.lineno}" for name, tree in modules() if name != RETRY for node in ast.walk(tree)
             if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
             and isinstance(node.left, ast.Constant) and node.left.value in (2, 2.0)]
    assert not found, "a backoff by hand; use kindling.core.policy (compute_backoff, Retry):\n" + "\n".join(found)


def test_every_listed_wait_still_exists():
    present = {(name, owner) for name, tree in modules() for owner, node in functions(tree)
               if isinstance(node, ast.For | ast.While) and sleeps_in(node)}
    assert set(WAITS) <= present, set(WAITS) - present
