"""template.yaml's Valkey trigger: woken by producers, a schedule only as a safety net, and a
worker in a VPC that still reaches what it uses."""

from pathlib import Path

from cfnlint.decode import cfn_yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = cfn_yaml.load(str(ROOT / "template.yaml"))
RES = TEMPLATE["Resources"]
CONDITIONS = TEMPLATE["Conditions"]


def test_the_schedule_is_a_safety_net_that_can_be_turned_off():
    schedule = TEMPLATE["Parameters"]["DrainSchedule"]
    assert schedule["Default"] == "rate(10 minutes)"
    ref = {"Ref": "DrainSchedule"}
    off = {"Fn::Or": [{"Fn::Equals": [ref, ""]}, {"Fn::Equals": [ref, "off"]}]}
    assert CONDITIONS["UseDrainSchedule"] == {"Fn::And": [{"Condition": "UseValkey"}, {"Fn::Not": [off]}]}
    assert RES["DrainRule"]["Condition"] == RES["DrainPermission"]["Condition"] == "UseDrainSchedule"
    target = RES["DrainRule"]["Properties"]["Targets"][0]
    assert target["Input"] == {"Fn::Sub": '{"kindling": "drain", "stream": "${ValkeyStream}"}'}


def test_producers_get_a_managed_policy_to_wake_the_worker():
    policy = RES["ProducerPolicy"]
    assert policy["Type"] == "AWS::IAM::ManagedPolicy" and policy["Condition"] == "UseValkey"
    statement, signing = policy["Properties"]["PolicyDocument"]["Statement"]
    assert signing["Fn::If"][0] == "UseSigning"  # reading the signing keys, when jobs are signed
    assert statement["Action"] == "lambda:InvokeFunction"
    assert statement["Resource"] == {"Fn::GetAtt": ["WorkerFunction", "Arn"]}
    output = TEMPLATE["Outputs"]["ProducerPolicyArn"]
    assert output["Condition"] == "UseValkey" and output["Value"] == {"Ref": "ProducerPolicy"}
    assert TEMPLATE["Outputs"]["WorkerFunctionName"]["Value"] == {"Ref": "WorkerFunction"}


def test_a_drain_may_invoke_its_own_function_to_hand_on():
    statements = RES["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    (hand_on,) = [s["Fn::If"] for s in statements if isinstance(s, dict) and s.get("Fn::If", [""])[0] == "UseValkey"]
    _, allowed, otherwise = hand_on
    assert otherwise == {"Ref": "AWS::NoValue"}
    assert allowed["Action"] == "lambda:InvokeFunction"
    name = RES["WorkerFunction"]["Properties"]["FunctionName"]["Fn::Sub"]
    assert allowed["Resource"]["Fn::Sub"].endswith(f":function:{name}")


def test_in_a_vpc_the_worker_reaches_dynamodb_sqs_lambda_and_s3():
    assert CONDITIONS["CreateVpcEndpoints"] == {"Fn::And": [
        {"Condition": "UseValkey"}, {"Condition": "UseVpc"}, {"Fn::Equals": [{"Ref": "VpcEndpoints"}, "true"]}]}
    endpoints = {k: v for k, v in RES.items() if v["Type"] == "AWS::EC2::VPCEndpoint"}
    secrets = endpoints.pop("SecretsManagerEndpoint")  # only when a secret is read (signing keys, the URL)
    assert secrets["Condition"] == "UseSecretsManagerEndpoint"
    reads_a_secret = {"Fn::Or": [{"Condition": "UseSigning"}, {"Condition": "UseValkeyUrlSecret"}]}
    assert CONDITIONS["UseSecretsManagerEndpoint"] == {"Fn::And": [{"Condition": "CreateVpcEndpoints"}, reads_a_secret]}
    assert all(v["Condition"] == "CreateVpcEndpoints" for v in endpoints.values())
    endpoints["SecretsManagerEndpoint"] = secrets
    kinds = {v["Properties"]["ServiceName"]["Fn::Sub"].rsplit(".", 1)[1]: v["Properties"]["VpcEndpointType"]
             for v in endpoints.values()}
    assert kinds == {"dynamodb": "Gateway", "s3": "Gateway", "sqs": "Interface", "lambda": "Interface",
                     "secretsmanager": "Interface"}
    for v in endpoints.values():
        props = v["Properties"]
        if props["VpcEndpointType"] == "Interface":
            assert props["PrivateDnsEnabled"] is True and props["SubnetIds"] == {"Ref": "VpcSubnetIds"}
            assert props["SecurityGroupIds"] == [{"Ref": "EndpointSecurityGroup"}]
        else:
            assert props["RouteTableIds"] == {"Ref": "VpcRouteTableIds"}
    ingress = RES["EndpointSecurityGroup"]["Properties"]["SecurityGroupIngress"][0]
    assert (ingress["FromPort"], ingress["ToPort"]) == (443, 443)
    assert TEMPLATE["Parameters"]["VpcEndpoints"]["AllowedValues"] == ["true", "false"]  # false: a NAT of yours
