"""The deployment's one name (optional, regions only): per region a custom domain on the region's
API with its own ACM certificate, a Route 53 health check on the regional endpoint's /v1/health,
and a latency record carrying that health check. Route 53 answers with the lowest-latency region
whose health check passes; an unhealthy region's record is left out, so clients go to the next
nearest healthy one (latency routing with health checks is failover among all the regions):
https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/resource-record-sets-values-latency-alias.html
and, for API Gateway, https://docs.aws.amazon.com/apigateway/latest/developerguide/dns-failover.html
(Evaluate Target Health alone fails a record only when API Gateway itself is down in the region;
the health check on our own path also catches our function failing there)."""
from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigw2
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_route53 as route53
from constructs import Construct

from jobsched_infra.config import StackConfig

HEALTH_PATH = "/v1/health"
# Route 53's checkers: every 30 s, unhealthy after 3 failures in a row (its defaults, stated).
HEALTH_INTERVAL_SECONDS = 30
HEALTH_FAILURES = 3


class FrontDoor(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig, api, stage_path: str,
                 stage=None) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        region = stack.region
        certificate = acm.Certificate.from_certificate_arn(self, "Certificate",
                                                           dict(config.certificate_arns)[region])
        if isinstance(api, apigw.RestApi):
            domain = apigw.DomainName(self, "Domain", domain_name=config.domain_name, certificate=certificate,
                                      endpoint_type=apigw.EndpointType.REGIONAL,
                                      security_policy=apigw.SecurityPolicy.TLS_1_2)
            apigw.BasePathMapping(self, "Mapping", domain_name=domain, rest_api=api, stage=api.deployment_stage)
            target = (domain.domain_name_alias_domain_name, domain.domain_name_alias_hosted_zone_id)
            api_id = api.rest_api_id
        else:
            domain = apigw2.DomainName(self, "Domain", domain_name=config.domain_name, certificate=certificate)
            apigw2.ApiMapping(self, "Mapping", api=api, domain_name=domain, stage=stage)
            target = (domain.regional_domain_name, domain.regional_hosted_zone_id)
            api_id = api.api_id
        # The regional endpoint itself (not the shared name, which resolves to whichever region is
        # nearest the checker): this region's API and function answer it.
        self.health_check = route53.CfnHealthCheck(self, "Health", health_check_config=route53.CfnHealthCheck.HealthCheckConfigProperty(
            type="HTTPS",
            fully_qualified_domain_name=f"{api_id}.execute-api.{region}.{stack.url_suffix}",
            port=443,
            resource_path=(f"/{stage_path}" if stage_path else "") + HEALTH_PATH,
            enable_sni=True,
            request_interval=HEALTH_INTERVAL_SECONDS,
            failure_threshold=HEALTH_FAILURES,
        ), health_check_tags=[route53.CfnHealthCheck.HealthCheckTagProperty(key="Name", value=f"jobsched {region}")])
        self.record = route53.CfnRecordSet(
            self, "Latency",
            hosted_zone_id=config.hosted_zone_id,
            name=f"{config.domain_name}.",
            type="A",
            set_identifier=region,
            region=region,
            health_check_id=self.health_check.attr_health_check_id,
            alias_target=route53.CfnRecordSet.AliasTargetProperty(
                dns_name=target[0], hosted_zone_id=target[1], evaluate_target_health=True),
        )
