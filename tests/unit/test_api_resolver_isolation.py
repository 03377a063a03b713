"""Two API containers answering at once (the local stack runs them as threads of one process):
each reads its own request, never the other's (Powertools keeps the request on a class that every
resolver of a process shares)."""
from aws_lambda_powertools.event_handler import APIGatewayRestResolver

from jobsched.handlers.api import OwnEventResolver
from jobsched.local.events import api_gateway_event


def answers_with_another_request_in_between(resolver_class) -> str:
    first, second = resolver_class(), resolver_class()

    @second.get("/who")
    def other():
        return {"who": second.current_event.headers.get("authorization")}

    @first.get("/who")
    def mine():
        # Another container answers a request while this one is inside its route.
        second.resolve(api_gateway_event("GET", "/who", {"Authorization": "Bearer tenant-b"}, None), None)
        return {"who": first.current_event.headers.get("authorization")}

    answer = first.resolve(api_gateway_event("GET", "/who", {"Authorization": "Bearer tenant-a"}, None), None)
    return answer["body"]


def test_a_container_reads_its_own_request_while_another_answers():
    assert "tenant-a" in answers_with_another_request_in_between(OwnEventResolver)


def test_powertools_alone_would_read_the_other_request():
    """Why OwnEventResolver exists: the plain resolver reads the request answered last."""
    assert "tenant-b" in answers_with_another_request_in_between(APIGatewayRestResolver)
