import os

from localstack.runtime import hooks
from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin


class LocalRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    """Entry point `local` of localstack.lambda.runtime_executor (LAMBDA_RUNTIME_EXECUTOR=local)."""

    name = "local"

    def load(self, *args, **kwargs):
        from localstack_host.executor import LocalRuntimeExecutor

        return LocalRuntimeExecutor


@hooks.on_infra_start()
def gateway_binds_its_host():
    """Listen on the host GATEWAY_LISTEN gives, not on every interface.

    TwistedRuntimeServer.register (localstack/runtime/server/twisted.py) drops the host of an
    IPv4 GATEWAY_LISTEN entry ("TODO: interface = host?"): 127.0.0.1:<port> listens on
    0.0.0.0:<port>. on_infra_start hooks run before the gateway registers its endpoints
    (LocalstackRuntime.run: _on_starting, then _init_gateway_server), so that module gets an
    `endpoints` here whose TCP4ServerEndpoint binds the host configured for its port."""
    from localstack import config
    from localstack.runtime.server import twisted as runtime_server
    from twisted.internet import endpoints

    class Endpoints:
        def __getattr__(self, name):
            return getattr(endpoints, name)

        @staticmethod
        def TCP4ServerEndpoint(reactor, port, *args, **kwargs):
            hosts = {
                listen.host
                for listen in config.GATEWAY_LISTEN
                if listen.port == port and not config.is_ipv6_address(listen.host)
            }
            # several hosts on one port cannot be told apart here: bind as LocalStack would
            if len(hosts) == 1 and not args and "interface" not in kwargs:
                kwargs["interface"] = hosts.pop()
            return endpoints.TCP4ServerEndpoint(reactor, port, *args, **kwargs)

    runtime_server.endpoints = Endpoints()


@hooks.on_infra_start()
def s3_storage_in_tmp():
    """S3 keeps object data in a hard-coded /tmp/localstack-s3-storage; on the host, keep it in
    LocalStack's temp dir (under FILESYSTEM_ROOT) like everything else."""
    from localstack import config
    from localstack.services.s3.storage import ephemeral

    store = ephemeral.EphemeralS3ObjectStore
    original_init = store.__init__
    root = os.path.join(config.dirs.tmp, "s3-storage")

    def __init__(self, root_directory=None):
        if root_directory == "/tmp/localstack-s3-storage":
            root_directory = root
        original_init(self, root_directory)

    store.__init__ = __init__


RAW_BODY = "_kindling_raw_body"  # where an event keeps its body as received until filtering is done


@hooks.on_infra_start()
def sqs_bodies_as_sent():
    """Deliver SQS message bodies to functions byte for byte, as AWS does.

    LocalStack's SqsPoller.handle_messages (services/lambda_/event_source_mapping/pollers/
    sqs_poller.py) parses each body with json.loads so filter criteria can match on it, then
    puts back json.dumps(parsed) ("HACK for fixing parity with v1"): a JSON body reaches the
    function with the standard library's separators and \\u escapes, a JSON string body loses
    its quotes. Anything that checks the exact bytes (a signature over the body) then fails.
    Here each event keeps its body as received (transform_into_events) and gets it back right
    after filtering, which still matches on the parsed body as AWS does; handle_messages then
    leaves a str body alone."""
    from localstack.services.lambda_.event_source_mapping.pollers import sqs_poller

    transform = sqs_poller.transform_into_events
    filter_events = sqs_poller.SqsPoller.filter_events

    def transform_into_events(messages):
        events = transform(messages)
        for event in events:
            event[RAW_BODY] = event["body"]
        return events

    def filter_events_then_restore_bodies(self, events):
        received = [(event, event.pop(RAW_BODY)) for event in events if RAW_BODY in event]
        matching = filter_events(self, events)
        for event, body in received:
            event["body"] = body
        return matching

    sqs_poller.transform_into_events = transform_into_events
    sqs_poller.SqsPoller.filter_events = filter_events_then_restore_bodies


@hooks.on_infra_start()
def function_snapstart_from_templates():
    """Give a function the SnapStart a template declares for it, as CloudFormation does.

    LocalStack's AWS::Lambda::Function provider (services/lambda_/resource_providers/
    aws_lambda_function.py) leaves SnapStart out of the CreateFunction call it makes, although
    its Lambda API takes it: a stack deployed with SnapStart gets a function and versions
    without it. Here the provider's create and update, once the function is active, set the
    template's SnapStart through UpdateFunctionConfiguration and wait for that update, before
    the stack goes on to publish the version (whose configuration is the function's then)."""
    import time

    from localstack.services.lambda_.resource_providers import aws_lambda_function as provider

    cls = provider.LambdaFunctionProvider

    def with_snapstart(handler):
        def run(self, request):
            event = handler(self, request)
            wanted = (request.desired_state or {}).get("SnapStart")
            name = (request.desired_state or {}).get("FunctionName")
            if wanted and name and event.status == provider.OperationStatus.SUCCESS:
                client = request.aws_client_factory.lambda_
                if client.get_function_configuration(FunctionName=name).get("SnapStart", {}).get("ApplyOn") != \
                        wanted.get("ApplyOn"):
                    client.update_function_configuration(FunctionName=name, SnapStart=wanted)
                    for _ in range(300):  # up to 30 s: a configuration update is quick here
                        if client.get_function_configuration(FunctionName=name).get("LastUpdateStatus") != \
                                "InProgress":
                            break
                        time.sleep(0.1)
            return event

        return run

    cls.create = with_snapstart(cls.create)
    cls.update = with_snapstart(cls.update)
