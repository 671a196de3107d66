"""sim's AWS endpoint holds each identity to the policy the stack synthesizes, as AWS would.

boto3 over HTTP, signed with the credentials sim writes: DIR/env (the CLI's operator: what any function may
do), each function's own key (what sim/invoke.py runs a handler with), and DIR/admin.env (unrestricted).
"""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from sim import invoke
from sim.aws.constants import FUNCTION_CREDENTIALS, REGION

pytestmark = pytest.mark.integration

OWNER_TAG = "nodescale.io/cluster"


def client(sim, service: str, credentials: dict[str, str]):
    return boto3.client(service, endpoint_url=sim.aws_endpoint, region_name=REGION, **credentials)


def functions_credentials(sim) -> dict[str, str]:
    return {"aws_access_key_id": sim.env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": sim.env["AWS_SECRET_ACCESS_KEY"]}


def code_of(call) -> str:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"]


def state_of(sim, instance_id: str) -> str:
    reservations = sim.boto3_client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
    return reservations[0]["Instances"][0]["State"]["Name"]


def test_the_functions_cannot_terminate_an_instance_they_do_not_own(sim):
    unmanaged = sim.seed["unmanaged_instance_ids"][0]
    ec2 = client(sim, "ec2", functions_credentials(sim))
    with pytest.raises(ClientError) as caught:
        ec2.terminate_instances(InstanceIds=[unmanaged])
    error = caught.value.response["Error"]
    assert error["Code"] == "UnauthorizedOperation"
    assert f"ec2:TerminateInstances on resource: arn:aws:ec2:{REGION}:123456789012:instance/{unmanaged}" in error["Message"]
    assert state_of(sim, unmanaged) == "running"
    denied = [c for c in sim.aws_calls("ec2", "TerminateInstances") if c.get("denied")]
    assert denied and denied[-1]["denied"]["identity"] == "operator"


def test_status_checks_are_allowed_for_repair(sim):
    statuses = client(sim, "ec2", functions_credentials(sim)).describe_instance_status()["InstanceStatuses"]
    assert statuses  # the seeded instances run
    # ...to the disruption function that repairs, and to no function that does not need it.
    assert client(sim, "ec2", FUNCTION_CREDENTIALS["disruption"]).describe_instance_status()["InstanceStatuses"]
    cleanup = client(sim, "ec2", FUNCTION_CREDENTIALS["cleanup"])
    assert code_of(cleanup.describe_instance_status) == "UnauthorizedOperation"


def test_the_admin_may_do_anything(sim):
    assert sim.boto3_client("iam").list_roles()["Roles"]
    assert sim.boto3_client("ec2").describe_instance_status()["InstanceStatuses"]


def test_a_launch_template_needs_the_ownership_tag_when_created(sim):
    ec2 = client(sim, "ec2", FUNCTION_CREDENTIALS["provisioner"])
    data = {"InstanceType": "m5.large"}
    untagged = lambda: ec2.create_launch_template(LaunchTemplateName="iam-untagged", LaunchTemplateData=data)  # noqa: E731
    assert code_of(untagged) == "UnauthorizedOperation"
    foreign = lambda: ec2.create_launch_template(  # noqa: E731
        LaunchTemplateName="iam-foreign", LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": OWNER_TAG, "Value": "another-cluster"}]}],
    )
    assert code_of(foreign) == "UnauthorizedOperation"
    made = ec2.create_launch_template(
        LaunchTemplateName="iam-tagged", LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": OWNER_TAG, "Value": sim.cluster}]}],
    )["LaunchTemplate"]
    # The cleanup function may delete it (it is this cluster's), and never launch from it.
    cleanup = client(sim, "ec2", FUNCTION_CREDENTIALS["cleanup"])
    launch = lambda: cleanup.create_fleet(  # noqa: E731
        Type="instant",
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateId": made["LaunchTemplateId"], "Version": "$Latest"}}],
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": OWNER_TAG, "Value": sim.cluster}]}],
    )
    assert code_of(launch) == "UnauthorizedOperation"
    cleanup.delete_launch_template(LaunchTemplateId=made["LaunchTemplateId"])


def test_a_fleet_whose_instances_lack_the_ownership_tag_is_refused(sim):
    admin = sim.boto3_client("ec2")
    template = admin.create_launch_template(
        LaunchTemplateName="iam-fleet", LaunchTemplateData={"InstanceType": "m5.large", "ImageId": "ami-12c6146b"},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [{"Key": OWNER_TAG, "Value": sim.cluster}]}],
    )["LaunchTemplate"]
    subnet = next(iter(sim.seed["subnets"].values()))
    ec2 = client(sim, "ec2", FUNCTION_CREDENTIALS["provisioner"])
    before = len(admin.describe_instances()["Reservations"])
    launch = lambda: ec2.create_fleet(  # noqa: E731
        Type="instant",
        LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateId": template["LaunchTemplateId"], "Version": "$Latest"},
            "Overrides": [{"SubnetId": subnet, "InstanceType": "m5.large"}],
        }],
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        TagSpecifications=[{"ResourceType": "fleet", "Tags": [{"Key": OWNER_TAG, "Value": sim.cluster}]}],
    )
    assert code_of(launch) == "UnauthorizedOperation"
    assert len(admin.describe_instances()["Reservations"]) == before
    admin.delete_launch_template(LaunchTemplateId=template["LaunchTemplateId"])


def test_an_unknown_access_key_is_refused(sim):
    stranger = client(sim, "ec2", {"aws_access_key_id": "AKIASTRANGER", "aws_secret_access_key": "x"})
    assert code_of(stranger.describe_instances) == "AuthFailure"
    ssm = client(sim, "ssm", {"aws_access_key_id": "AKIASTRANGER", "aws_secret_access_key": "x"})
    assert code_of(lambda: ssm.get_parameters_by_path(Path="/")) == "UnrecognizedClientException"


def test_each_function_reads_only_its_own_parameters(sim):
    ssm = client(sim, "ssm", FUNCTION_CREDENTIALS["provisioner"])
    ssm.get_parameters_by_path(Path=sim.env["NODESCALE_NODEPOOL_PARAMETER_PATH"], Recursive=True)
    assert code_of(lambda: ssm.get_parameters_by_path(Path="/other-team/", Recursive=True)) == "AccessDeniedException"


def test_only_the_interruption_function_reads_its_queue_and_no_function_writes_to_it(sim):
    # The event source mapping polls as the function's role: the stack grants that role ReceiveMessage and
    # DeleteMessage on the interruption queue (its resource ARN, as sim reads it from QueueUrl), nothing more.
    url = sim.seed["interruption_queue_url"]
    invoke.deliver_as_rule(sim.boto3_client("sqs"), f"nodescale-{sim.cluster}-spot-interruption", ["{}"])
    interruption = client(sim, "sqs", FUNCTION_CREDENTIALS["interruption"])
    (message,) = interruption.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    interruption.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    denied_codes = ("AccessDenied", "AccessDeniedException")  # SQS's query and JSON protocols' spellings
    assert code_of(lambda: interruption.send_message(QueueUrl=url, MessageBody="{}")) in denied_codes
    dead = sim.seed["dead_letter_queue_url"]
    assert code_of(lambda: interruption.receive_message(QueueUrl=dead)) in denied_codes
    provisioner = client(sim, "sqs", FUNCTION_CREDENTIALS["provisioner"])
    assert code_of(lambda: provisioner.receive_message(QueueUrl=url)) in denied_codes
    denied = [c for c in sim.aws_calls("sqs", "ReceiveMessage") if c.get("denied")]
    assert denied[-1]["denied"]["resource"].endswith(":nodescale-demo-cluster-interruption")


def test_put_events_refuses_a_source_aws_reserves(sim):
    """#27.8: only AWS services emit `aws.*` events (PutEventsResultEntry: NotAuthorizedForSourceException), so a
    PutEvents of a forged EC2 spot warning cannot reach the queue through the stack's rule; moto accepted it."""
    events = sim.boto3_client("events")
    forged = {"Source": "aws.ec2", "DetailType": "EC2 Spot Instance Interruption Warning",
              "Detail": '{"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"}'}
    answer = events.put_events(Entries=[forged, {**forged, "Source": "com.example.app"}])
    assert answer["FailedEntryCount"] == 1
    assert answer["Entries"][0]["ErrorCode"] == "NotAuthorizedForSourceException"
    assert "EventId" in answer["Entries"][1]
    url = sim.seed["interruption_queue_url"]
    attributes = sim.boto3_client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"
