"""Two CloudFormation templates made comparable: template.yaml translated by SAM and resolved
for given parameter values, and a synthesized CDK template, each as
``{logical id: {"Type", "Properties", "DependsOn"}}`` with every intrinsic function worked
out to a plain value: a parameter to its value, a condition to the branch it takes,
``AWS::NoValue`` dropped, a reference to ``"{{Ref X}}"`` or ``"{{X.Attr}}"``, a pseudo
parameter to ``"{{AWS::StackName}}"``, a join or sub to the string it makes, and every
scalar to its string (CloudFormation passes them to the services as strings)."""

from __future__ import annotations

import copy
import os
import re
from typing import Any

from support import templates

_DROP = object()
PSEUDO = ("AWS::StackName", "AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::URLSuffix", "AWS::StackId")


class _Resolver:
    def __init__(self, doc: dict, parameters: dict[str, Any], names: dict[str, str]) -> None:
        self.doc, self.names = doc, names
        declared = doc.get("Parameters", {})
        unknown = set(parameters) - set(declared)
        if unknown:
            raise KeyError(f"not parameters of the template: {sorted(unknown)}")
        self.params = {k: parameters.get(k, spec.get("Default")) for k, spec in declared.items()}
        for key, spec in declared.items():
            if spec.get("Type") == "CommaDelimitedList" and isinstance(self.params[key], str):
                self.params[key] = self.params[key].split(",") if self.params[key] else [""]
        self.conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self.conditions:
            self.conditions[name] = self.truth(self.doc["Conditions"][name])
        return self.conditions[name]

    def truth(self, node: Any) -> bool:
        (fn, arg), = node.items()
        if fn == "Condition":
            return self.condition(arg)
        if fn == "Fn::Equals":
            a, b = (self.value(x) for x in arg)
            return a == b
        if fn == "Fn::Not":
            return not self.truth(arg[0])
        if fn == "Fn::And":
            return all(self.truth(x) for x in arg)
        if fn == "Fn::Or":
            return any(self.truth(x) for x in arg)
        raise ValueError(f"not a condition: {node!r}")

    def name(self, logical_id: str) -> str:
        return self.names.get(logical_id, logical_id)

    def ref(self, target: str) -> Any:
        if target == "AWS::NoValue":
            return _DROP
        if target in self.params:
            return self.params[target]
        if target in PSEUDO:
            return "{{" + target + "}}"
        return "{{Ref " + self.name(target) + "}}"

    def sub(self, text: str, variables: dict) -> str:
        def one(match: re.Match) -> str:
            key = match.group(1)
            if key in variables:
                return str(self.value(variables[key]))
            if "." in key and key.split(".")[0] not in self.params:
                resource, attr = key.split(".", 1)
                return "{{" + self.name(resource) + "." + attr + "}}"
            return str(self.value({"Ref": key}))
        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self.value(x) for x in node) if v is not _DROP]
        if isinstance(node, bool):
            return "true" if node else "false"
        if isinstance(node, int | float):
            return str(node)
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (fn, arg), = node.items()
            if fn == "Ref":
                return self.value(self.ref(arg))
            if fn == "Fn::If":
                return self.value(arg[1] if self.condition(arg[0]) else arg[2])
            if fn == "Fn::GetAtt":
                resource, attr = arg.split(".", 1) if isinstance(arg, str) else arg
                return "{{" + self.name(resource) + "." + attr + "}}"
            if fn == "Fn::Sub":
                text, variables = (arg, {}) if isinstance(arg, str) else arg
                return self.sub(text, variables)
            if fn == "Fn::Join":
                return str(arg[0]).join(str(x) for x in self.value(arg[1]))
            if fn == "Fn::Split":
                return self.value(arg[1]).split(arg[0])
            if fn == "Fn::Select":
                return self.value(arg[1])[int(self.value(arg[0]))]
            if fn == "Fn::FindInMap":
                name, first, second = (self.value(x) for x in arg)
                return self.value(self.doc["Mappings"][name][first][second])
        resolved = {k: self.value(v) for k, v in node.items()}
        return {k: v for k, v in resolved.items() if v is not _DROP}

    def resources(self) -> dict[str, dict]:
        out = {}
        for logical_id, res in self.doc["Resources"].items():
            if "Condition" in res and not self.condition(res["Condition"]):
                continue
            depends = res.get("DependsOn", [])
            out[self.name(logical_id)] = {
                "Type": res["Type"], "Properties": self.value(res.get("Properties", {})),
                "DependsOn": sorted(self.name(d) for d in ([depends] if isinstance(depends, str) else depends)),
            }
        return out


def sam_resources(parameters: dict[str, Any] | None = None) -> dict[str, dict]:
    """template.yaml as CloudFormation deploys it with ``parameters`` (the template's names and
    values; its defaults for the others): translated by SAM (with code in S3, which the
    translation asks for), resolved. The layers keep their template names (``KindlingLayer``,
    ``KindlingValkeyLayer``)."""
    from samtranslator.translator.transform import transform

    doc = templates.template()
    doc["Resources"]["KindlingLayer"]["Properties"]["ContentUri"] = "s3://artifacts/layer.zip"
    doc["Resources"]["KindlingValkeyLayer"]["Properties"]["ContentUri"] = "s3://artifacts/valkey-layer.zip"
    doc["Resources"]["WorkerFunction"]["Properties"]["CodeUri"] = "s3://artifacts/function.zip"
    region = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"  # the translation asks boto for one; no call is made
    try:
        translated = transform(copy.deepcopy(doc), {}, None)
    finally:
        if region is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = region
    translated.setdefault("Parameters", doc["Parameters"])
    translated["Mappings"], translated["Conditions"] = doc["Mappings"], doc["Conditions"]
    names = {k: canonical(k) for k in translated["Resources"]}
    return _Resolver(translated, parameters or {}, names).resources()


HASHED = ("KindlingValkeyLayer", "KindlingLayer", "WorkerFunctionVersion")
"""Logical ids that end in a hash of what they publish (SAM's layer and function versions,
the construct's function version): compared by the name before the hash."""


def canonical(name: str) -> str:
    for prefix in HASHED:
        if re.fullmatch(prefix + r"[0-9a-f]{10}", name):
            return prefix
    return name


def cdk_resources(synthesized: dict) -> dict[str, dict]:
    """A synthesized CDK template's resources, each named by the last part of its construct
    path (``.../Worker/JobsQueue`` is ``JobsQueue``), resolved."""
    names = {logical_id: canonical(res["Metadata"]["aws:cdk:path"].rsplit("/", 2)[
                 -2 if res["Metadata"]["aws:cdk:path"].endswith("/Resource") else -1])
             for logical_id, res in synthesized["Resources"].items() if "aws:cdk:path" in res.get("Metadata", {})}
    doc = {**synthesized, "Parameters": {}}
    return _Resolver(doc, {}, names).resources()
