"""Installation: the hooks on every botocore client of the process, and the one active layer
they answer to."""
from __future__ import annotations

import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor

from jobsched.local.strict_aws.layer import StrictAws
from jobsched.local.strict_aws.reports import REPORT_HEADER, report_keys


_active: StrictAws | None = None
_installed = False


def activate(layer: StrictAws | None) -> StrictAws | None:
    """Make `layer` the one every client of the process answers to (None: off); returns the previous."""
    global _active
    previous, _active = _active, layer
    return previous


def active() -> StrictAws | None:
    return _active


def _before(client_ref, params, model, context, **_):
    layer = _active
    if layer is not None:
        layer.before(client_ref(), model, params, context)


def _after(client_ref, http_response, parsed, model, context, **_):
    layer = _active
    if layer is not None:
        layer.after(client_ref(), http_response, parsed, model, context)


def _empty_receive(context, **_):
    """A long-polling ReceiveMessage past the queue's in-flight limit (StrictAws._check_sqs): AWS
    answers no message and no error; so does this, without asking the emulator."""
    call = context.get("strict_aws")
    if call is None or not call.answer_empty:
        return None
    from botocore.awsrequest import AWSResponse

    return AWSResponse("", 200, {}, None), {"Messages": [], "ResponseMetadata": {"HTTPStatusCode": 200}}


def _ask_report(request, **_):
    """Only a call whose bill needs items asks for them: a query, a scan or a whole-item read
    would have the emulator read its request again under its lock for nothing."""
    layer = _active
    call = request.context.get("strict_aws")
    if layer is not None and layer._reports and call is not None and \
            report_keys(call.operation, call.params, layer._primary):
        request.headers[REPORT_HEADER] = "1"


def install() -> None:
    """Hook every botocore client built from now on (idempotent). The hooks do nothing while no
    layer is active. Also: a thread of a function's thread pool acts as that function (in Lambda
    the whole process is the function)."""
    global _installed
    if _installed:
        return
    import weakref

    import botocore.session

    original = botocore.session.Session.create_client

    @functools.wraps(original)
    def create_client(self, *args, **kwargs):
        client = original(self, *args, **kwargs)
        ref = weakref.ref(client)
        # Last: after boto3's resource layer has turned Python values into DynamoDB's wire form.
        client.meta.events.register_last("before-parameter-build", functools.partial(_before, ref))
        # First: before boto3's resource layer turns the answer's wire form into Python values.
        # (a handler on the service's own event name runs before those on its parents).
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register_first(f"after-call.{service}", functools.partial(_after, ref))
        if service == "dynamodb":
            client.meta.events.register("before-sign.dynamodb", _ask_report)
        if service == "sqs":
            client.meta.events.register_first("before-call.sqs.ReceiveMessage", _empty_receive)
        return client

    botocore.session.Session.create_client = create_client
    original_submit = ThreadPoolExecutor.submit

    def submit(self, fn, /, *args, **kwargs):
        return original_submit(self, contextvars.copy_context().run, fn, *args, **kwargs)

    ThreadPoolExecutor.submit = submit
    _lift_moto_item_limit()
    _installed = True


def _lift_moto_item_limit() -> None:
    """moto refuses items past 405,000 bytes by a count of its own (not DynamoDB's formula), which
    refuses items AWS stores (400 KB = 409,600 bytes by AWS's formula) and sums the whole item on
    every attribute set. While a layer is active, the layer alone decides, by AWS's formula."""
    try:
        from moto.dynamodb.models import dynamo_type
    except ImportError:  # pragma: no cover - moto is a dev dependency
        return
    limited = dynamo_type.LimitedSizeDict
    original = limited.__setitem__

    def setitem(self, key, value):
        if _active is None:
            return original(self, key, value)
        return dict.__setitem__(self, key, value)

    limited.__setitem__ = setitem
