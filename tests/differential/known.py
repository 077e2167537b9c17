"""Where kindling answers differently from botocore on purpose, each with its reason.

``DELIBERATE``: part -> [(name, reason, matcher)]; a difference is deliberate when a matcher of
its part takes the outcome. Every other difference is a defect: the suite fails on it. An
entry that no longer excuses any difference fails too, and is deleted here: the list only
ever shrinks."""

from __future__ import annotations

from collections.abc import Callable


def _no_region_for_botocore(o) -> bool:
    """botocore finds no region: no AWS_DEFAULT_REGION, no region in the profile."""
    return "AWS_DEFAULT_REGION" not in o.case.env and "region" not in o.case.files.get("config", "")


def _default_port_written_out(o) -> bool:
    url = o.case.url
    return url.startswith("https://") and ":443" in url or url.startswith("http://") and url.endswith(":80")


DELIBERATE: dict[str, list[tuple[str, str, Callable]]] = {
    "credentials": [
        ("a token file's trailing line break",
         "kindling strips the line break an editor or `echo` leaves at the end of "
         "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE; botocore refuses the file. Either way no other identity is used",
         lambda o: o.case.files.get("tok", "").endswith("\n") and o.botocore[0] == "refused"),
    ],
    "endpoints": [],
    "endpoint settings": [
        ("AWS_REGION where botocore has no region",
         "kindling reads AWS_REGION (which Lambda and the other AWS SDKs set, and botocore does not read) after "
         "AWS_DEFAULT_REGION and the profile's region: only where botocore would have no region at all",
         lambda o: _no_region_for_botocore(o) and "AWS_REGION" in o.case.env),
        ("no region, no global fallback",
         "without any region kindling refuses every service; botocore sends STS and S3 to their global endpoints "
         "(us-east-1). A worker without a region is misconfigured: it says so rather than guess",
         lambda o: _no_region_for_botocore(o) and "AWS_REGION" not in o.case.env and o.kindling[0] == "refused"
         and o.case.service in ("sts", "s3")),
    ],
    "proxies": [
        ("https:// proxies",
         "kindling speaks to a proxy over plain HTTP (CONNECT for https endpoints): an https:// proxy URL is refused "
         "when the connection opens, with that reason, where botocore would use it",
         lambda o: o.botocore[0] == "https proxy" and o.kindling == ("refused",)),
        ("the scheme's default port written out",
         "kindling matches NO_PROXY against an endpoint URL's host and port as it writes the URL, without the "
         "scheme's default port: https://host:443 is matched as https://host (botocore: as written)",
         _default_port_written_out),
    ],
}


def excuse(outcome) -> str | None:
    """The name of the deliberate difference that covers ``outcome``, or None."""
    for name, _, matches in DELIBERATE[outcome.case.part]:
        if matches(outcome):
            return name
    return None
