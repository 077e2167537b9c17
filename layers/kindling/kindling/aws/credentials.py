"""Credentials: the environment's first, re-read on every call, then the rest of the chain.

``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, as Lambda sets
them: inside Lambda nothing else is read or imported. When they are absent (outside Lambda;
SnapStart functions get no key variables) :mod:`kindling.aws.chain` is imported and walks
botocore's chain: profiles and the shared files, web identity, the container endpoint
(:mod:`kindling.aws.container`), EC2 instance metadata.
"""

import os


def get_credentials(deadline: float | None = None) -> tuple[str, str, str | None]:
    """(access key, secret key, session token or None), from the environment or the rest of
    the chain (fetched by ``deadline``, a time.monotonic value, if given)."""
    env = os.environ
    access_key = env.get("AWS_ACCESS_KEY_ID")
    secret_key = env.get("AWS_SECRET_ACCESS_KEY")
    if access_key and secret_key:
        return access_key, secret_key, env.get("AWS_SESSION_TOKEN") or None
    from kindling.aws import chain  # not in Lambda: it sets the variables above

    return chain.get(deadline)
