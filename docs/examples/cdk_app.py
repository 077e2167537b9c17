"""This project's CDK app: kindling's worker running the tasks in functions/worker.

KindlingWorker makes what kindling's template.yaml makes (queue and dead-letter queue,
results table, payload bucket, layer, function, event source mapping, policies, alarms) and
takes the template's parameters as keyword arguments in snake_case. `make build` builds the
code it deploys into .build/ (the function with its bytecode, the kindling layer, and the
Valkey layer, which the function carries only with a Valkey URL: valkey_url=...).
"""

from aws_cdk import App, Stack
from kindling.tools.cdk import KindlingWorker, add_outputs

app = App()
stack = Stack(app, app.node.try_get_context("stack") or "kindling")
worker = KindlingWorker(
    stack, "Worker",
    function_code=".build/function",
    layer_code=".build/layer",
    valkey_layer_code=".build/valkey-layer",
    # template.yaml's parameters, e.g.:
    max_attempts=3,
    memory_size=512,
    alarms=False,
)
add_outputs(worker)  # QueueUrl, ResultsTableName, ... as template.yaml's outputs
app.synth()
