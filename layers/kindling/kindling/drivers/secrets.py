"""Reading a secret at first use, with kindling's own AWS client (no boto3 in the worker).

A reference is a Secrets Manager secret (its ARN or name; the value is its SecretString)
or an SSM SecureString parameter (``arn:aws:ssm:...:parameter/<name>`` or ``ssm:<name>``,
read with decryption). Nothing here runs at import: a worker pays the round trip on the
first batch that needs the secret, and only when its deployment uses one.

Errors name the reference and the service's error code, never the value.
"""

from __future__ import annotations

from kindling.core.errors import KindlingError


class SecretUnavailable(KindlingError):
    """The secret could not be read (service down, access denied, no such secret)."""


def is_ssm(ref: str) -> bool:
    return ref.startswith("ssm:") or (ref.startswith("arn:") and ref.split(":")[2:3] == ["ssm"])


def read(ref: str, *, deadline: float | None = None) -> str:
    """The secret's value (a SecretString, or an SSM parameter's decrypted value)."""
    from kindling.drivers import aws

    if not ref:
        raise SecretUnavailable("no secret reference given")
    try:
        if is_ssm(ref):
            name = ref[4:] if ref.startswith("ssm:") else ref
            reply = aws.ssm().call(
                "GetParameter", {"Name": name, "WithDecryption": True}, deadline=deadline)
            value = (reply.get("Parameter") or {}).get("Value")
        else:
            reply = aws.secretsmanager().call("GetSecretValue", {"SecretId": ref}, deadline=deadline)
            value = reply.get("SecretString")
    except aws.AwsError as exc:
        raise SecretUnavailable(f"cannot read secret {ref}: {exc.code}") from None
    if not isinstance(value, str) or not value:
        raise SecretUnavailable(f"secret {ref} has no string value (a binary secret is not supported)")
    return value
