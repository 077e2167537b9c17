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
