"""A CDK app of one KindlingWorker, for ``cdk synth`` (infra/cdk/deploy.py deploys it into
LocalStack). Its context says what to build:

    infra/cdk/node_modules/.bin/cdk synth --app ".venv/bin/python infra/cdk/app.py" \\
      -c stack=kindling-cdk -c function_code=functions/worker -c layer_code=/tmp/layer \\
      -c 'parameters={"max_attempts": 4}'

``parameters``: KindlingWorker's keyword arguments as JSON (template.yaml's parameters in
snake_case). No bootstrap version rule: LocalStack has no bootstrap stack to check.
"""

from __future__ import annotations

import json

from aws_cdk import App, DefaultStackSynthesizer, Stack
from kindling.tools.cdk import KindlingWorker, add_outputs


def main() -> None:
    app = App()
    context = app.node.try_get_context
    stack = Stack(app, context("stack") or "kindling-cdk",
                  synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
    parameters = context("parameters") or {}
    worker = KindlingWorker(stack, "Worker", function_code=context("function_code") or "functions/worker",
                            layer_code=context("layer_code") or ".layer",
                            valkey_layer_code=context("valkey_layer_code"),
                            **(json.loads(parameters) if isinstance(parameters, str) else parameters))
    add_outputs(worker)
    app.synth()


if __name__ == "__main__":
    main()
