#!/usr/bin/env python3
"""template.yaml as CloudFormation receives it: SAM's own translator (samtranslator, the library
`sam validate` and `sam deploy` run) turns the template into plain CloudFormation, and this
checks what the translation makes of it, where a reading of the template alone would miss it:

- the REST API has exactly one stage, the one the template names (without `OpenApiVersion`,
  SAM's deployment adds a stage named "Stage" with no throttling and no access log);
- no method's integration carries credentials: API Gateway invokes the coordinator under the
  resource-based permission SAM adds (`InvokeRole: NONE`), not with the caller's credentials
  (SAM's default, CALLER_CREDENTIALS, turns a caller allowed only execute-api:Invoke into a
  5xx), and every route of the coordinator has that permission;
- API Gateway's account setting is not made right after its logging role is created (IAM's
  propagation delay rolls a first deploy back): it waits for the lake's delivery stream, which
  takes about a minute, and does not wait for its own role only;
- the names analysts type in Athena (the Glue database) are plain identifiers for the default
  stack name (samconfig.toml's), so no query needs quoting;
- every Secrets Manager reference names its version (CloudFormation resolves a reference
  again only when its text changes: one to the current version keeps its first value through
  every rotation), and the template's rules refuse the secret without its version;
- an alarm that counts missing data as breaching waits at least as long as the slowest
  SweepSchedule the parameter allows (StuckTransactions, 5 minutes breaching, sat in ALARM
  under any slower schedule), and the sweeper's heartbeat alarm exists;
- the lake's delivery stream logs its errors (failed Parquet conversions go under errors/
  silently otherwise) to a log group of the stack its role may write to;
- parameters that only work together are refused apart: the rules, evaluated over every
  combination of set and empty, accept the OIDC issuer's three (issuer, audience, key set)
  all or none, and each secret with its version.

Offline: the code locations are replaced by an S3 URI as `sam package` would, and the managed
policies SAM attaches are named here instead of being looked up in IAM. Run by `make validate`
(and so `make test`) with the pinned packages of .tools/venv. Exit status 1, one line per
finding, when anything is wrong.
"""

import os
import re
import sys
import tomllib
from pathlib import Path

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

ROOT = Path(__file__).resolve().parents[2]


class ManagedPolicies:
    """The managed policies the template's functions get from SAM (Tracing: Active, the
    default execution role), by name, so the translation needs no IAM call."""

    def load(self):
        return {
            "AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
            "AWSLambdaBasicExecutionRole":
                "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        }


def translated():
    """The whole template as SAM translates it."""
    template = yaml_parse((ROOT / "template.yaml").read_text())
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://bucket/key"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(template, {}, ManagedPolicies())


# The OIDC issuer's parameters: the authorizer trusts an issuer only with all three.
SET_TOGETHER = [("WebSocketIssuer", "WebSocketAudience", "WebSocketJwksUrl")]

# {{resolve:secretsmanager:secret-id:SecretString:json-key:version-stage:version-id}}
SECRET_REFERENCE = re.compile(
    r"\{\{resolve:secretsmanager:(?P<id>\$\{\w+\}|[^:]+):SecretString"
    r"(?::(?P<key>[^:]*))?(?::(?P<stage>[^:]*))?(?::(?P<version>\$\{\w+\}|[^:}]*))?\}\}"
)


def strings(value):
    """Every string inside a translated value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def rule_value(value, params):
    """A rule's intrinsic function (the few the template's rules use) for parameter values."""
    if not isinstance(value, dict):
        return value
    (fn, arg), = value.items()
    if fn == "Ref":
        return params[arg]
    if fn == "Fn::Equals":
        return rule_value(arg[0], params) == rule_value(arg[1], params)
    if fn == "Fn::Not":
        return not rule_value(arg[0], params)
    if fn == "Fn::And":
        return all(rule_value(a, params) for a in arg)
    if fn == "Fn::Or":
        return any(rule_value(a, params) for a in arg)
    raise ValueError(f"cannot evaluate {value!r} in a rule here")


def accepted(template, params):
    """Whether the template's rules accept a deploy with these parameter values."""
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not rule_value(rule["RuleCondition"], params):
            continue
        if not all(rule_value(a["Assert"], params) for a in rule["Assertions"]):
            return False
    return True


def check_secrets_and_rules(template):
    """Secret references name their version; parameters that work only together are refused
    apart, and accepted all set or all empty."""
    problems = []
    groups = list(SET_TOGETHER)
    for name, resource in template["Resources"].items():
        for text in strings(resource.get("Properties", {})):
            for ref in SECRET_REFERENCE.finditer(text):
                version = ref.group("version") or ""
                if not version.startswith("${"):
                    problems.append(
                        f"{name}: {ref.group(0)} names no version parameter: CloudFormation "
                        "would keep the value it first read through every rotation")
                    continue
                groups.append((ref.group("id")[2:-1], version[2:-1]))
            if "resolve:secretsmanager" in text and not SECRET_REFERENCE.search(text):
                problems.append(f"{name}: a Secrets Manager reference this check cannot read: {text}")
    defaults = {k: v.get("Default", "") for k, v in template["Parameters"].items()}
    for group in sorted(set(groups)):
        for mask in range(2 ** len(group)):
            chosen = {p for i, p in enumerate(group) if mask >> i & 1}
            params = dict(defaults, **{p: "x" * 36 for p in chosen})
            should = not chosen or len(chosen) == len(group)
            if accepted(template, params) != should:
                verb = "accept" if should else "refuse"
                problems.append(
                    f"the rules do not {verb} {', '.join(sorted(chosen)) or 'none'} set of "
                    f"{', '.join(group)} (set together or not at all)")
    return problems


def of_type(resources, kind):
    return {k: v for k, v in resources.items() if v["Type"] == kind}


def evaluate(value, stack):
    """The few intrinsic functions the checked names use, for a stack named `stack`."""
    if isinstance(value, str):
        return value
    (fn, arg), = value.items()
    if fn == "Ref" and arg == "AWS::StackName":
        return stack
    if fn == "Fn::Join":
        parts = evaluate(arg[1], stack) if isinstance(arg[1], dict) else arg[1]
        return arg[0].join(evaluate(v, stack) for v in parts)
    if fn == "Fn::Split":
        return evaluate(arg[1], stack).split(arg[0])
    if fn == "Fn::Sub" and isinstance(arg, str):
        return arg.replace("${AWS::StackName}", stack)
    raise ValueError(f"cannot evaluate {value!r} here")


def default_stack():
    config = tomllib.loads((ROOT / "samconfig.toml").read_text())
    return config["default"]["global"]["parameters"]["stack_name"]


def check(resources):
    problems = []
    stack = default_stack()
    for name, account in of_type(resources, "AWS::ApiGateway::Account").items():
        waits = account.get("DependsOn", [])
        waits = [waits] if isinstance(waits, str) else waits
        slow = [w for w in waits
                if resources.get(w, {}).get("Type") == "AWS::KinesisFirehose::DeliveryStream"]
        if not slow:
            problems.append(f"{name} is set as soon as its role exists (DependsOn {waits}): "
                            "IAM may not have propagated the role yet")
    for name, db in of_type(resources, "AWS::Glue::Database").items():
        db_name = evaluate(db["Properties"]["DatabaseInput"]["Name"], stack)
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", db_name):
            problems.append(f"{name} is named {db_name!r} for the stack {stack!r}: Athena "
                            "queries would have to quote it")
    stages = of_type(resources, "AWS::ApiGateway::Stage")
    if len(stages) != 1:
        problems.append(f"the REST API has {len(stages)} AWS::ApiGateway::Stage resources, not 1")
    for name, deployment in of_type(resources, "AWS::ApiGateway::Deployment").items():
        if "StageName" in deployment["Properties"]:
            problems.append(
                f"{name} creates a stage of its own ({deployment['Properties']['StageName']!r}): "
                "a second stage without throttling or access logs (set OpenApiVersion)")
    routes = 0
    for api_name, api in of_type(resources, "AWS::ApiGateway::RestApi").items():
        for path, methods in api["Properties"]["Body"]["paths"].items():
            for method, op in methods.items():
                integration = op.get("x-amazon-apigateway-integration", {})
                routes += 1
                if "credentials" in integration:
                    problems.append(
                        f"{api_name} {method.upper()} {path}: the integration invokes with "
                        f"credentials {integration['credentials']!r} (set Auth: InvokeRole: NONE)")
    permissions = [
        p for p in of_type(resources, "AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == {"Ref": "CoordinatorFunction"}
        and p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    if routes == 0:
        problems.append("the translation has no REST routes")
    if len(permissions) != routes:
        problems.append(f"{routes} REST routes but {len(permissions)} permissions for API Gateway "
                        "to invoke the coordinator")
    return problems


def slowest_schedule_s(parameter):
    """The longest interval (s) between passes a rate() schedule the parameter admits has (its
    AllowedPattern, tried for every rate up to a day); None when it admits any expression."""
    pattern = parameter.get("AllowedPattern")
    if pattern is None:
        return None
    slowest = 0
    for n in range(1, 1441):
        for text, seconds in ((f"rate({n} minute{'s' * (n > 1)})", n * 60),
                              (f"rate({n} hour{'s' * (n > 1)})", n * 3600)):
            if re.fullmatch(pattern, text):
                slowest = max(slowest, seconds)
    if re.fullmatch(pattern, "cron(0 0 * * ? *)"):
        return None
    return slowest


def check_alarms_and_lake_logs(template):
    problems = []
    resources = template["Resources"]
    slowest = slowest_schedule_s(template["Parameters"]["SweepSchedule"])
    heartbeat = False
    for name, alarm in of_type(resources, "AWS::CloudWatch::Alarm").items():
        p = alarm["Properties"]
        if p.get("TreatMissingData") != "breaching":
            continue
        window = int(p["Period"]) * int(p["EvaluationPeriods"])
        if slowest is None or window < slowest:
            problems.append(
                f"{name} counts missing data as breaching over {window} s, but SweepSchedule "
                f"allows {'any schedule' if slowest is None else f'{slowest} s'} between passes: "
                "it would sit in ALARM")
        heartbeat |= p.get("MetricName") == "SweepLatency" and p.get("Statistic") == "SampleCount"
    if not heartbeat:
        problems.append("no alarm goes off when the sweeper stops passing (SweepLatency's SampleCount)")
    for name, stream in of_type(resources, "AWS::KinesisFirehose::DeliveryStream").items():
        dest = stream["Properties"]["ExtendedS3DestinationConfiguration"]
        logging = dest.get("CloudWatchLoggingOptions", {})
        group = logging.get("LogGroupName", {}).get("Ref") if isinstance(logging.get("LogGroupName"), dict) else None
        if not logging.get("Enabled") or resources.get(group, {}).get("Type") != "AWS::Logs::LogGroup":
            problems.append(f"{name} logs no errors to a log group of the stack: a failed Parquet "
                            "conversion would only show as objects under errors/")
            continue
        role = dest["RoleARN"]["Fn::GetAtt"][0]
        writes = [st for pol in resources[role]["Properties"].get("Policies", [])
                  for st in pol["PolicyDocument"]["Statement"]
                  if "logs:PutLogEvents" in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
                  and st["Resource"] == {"Fn::GetAtt": [group, "Arn"]}]
        if not writes:
            problems.append(f"{name}'s role {role} may not write its log group {group} (logs:PutLogEvents)")
    return problems


def main():
    template = translated()
    problems = (check(template["Resources"]) + check_secrets_and_rules(template)
                + check_alarms_and_lake_logs(template))
    for p in problems:
        print(f"template.yaml (as SAM translates it): {p}", file=sys.stderr)
    if not problems:
        print("template.yaml as SAM translates it: one REST stage; API Gateway invokes the "
              "coordinator under its own permission; secrets pinned to their versions; "
              "parameters that work together are refused apart; alarms wait out the slowest "
              "sweep schedule; the lake's delivery stream logs its errors")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
