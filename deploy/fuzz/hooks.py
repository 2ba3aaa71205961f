"""Schemathesis hooks for deploy/fuzz/admin.sh (loaded through SCHEMATHESIS_HOOKS=hooks). They only
help generation: nothing here looks at a response or decides whether a check passed.

1. The `webhook-url` string format of the document (an https URL whose host resolves only to public
   addresses, decided by DNS when the endpoint is saved) gets a generator: https URLs of public IPv4
   literals (the fuzz machine may have no DNS), with a random port and path.
2. The one app rule a JSON Schema cannot state: in `metaData` and `metaDataInvite`, no descriptor's
   `path` may equal another's or be a dotted prefix of it (one JWT claim would overwrite the other);
   the server answers 422 `duplicate` naming the field. Before a positive request to create or change
   an app is sent, a descriptor whose path overlaps an earlier one gets a fresh path, so that
   "schema-valid" keeps meaning "accepted". Nothing else in a generated request is changed, and
   negative (schema-breaking) requests are sent as generated.
"""
import schemathesis
from hypothesis import strategies as st

# CPython 3.11 before 3.11.8 (gh-106905) can raise "SystemError: AST constructor recursion depth
# mismatch" from ast.parse when it runs deep in a worker thread's stack. Hypothesis calls ast.parse
# only to pretty-print a lambda for a strategy's repr, and schemathesis's coverage phase reports the
# SystemError as a runtime error of the fuzz run (a failed CI run with Python 3.11.7, nothing to do
# with the server). A lambda whose source cannot be parsed gets Hypothesis's own "unknown" description
# instead; what is generated and sent does not change.
try:
    from hypothesis.internal import lambda_sources as _lambda_sources

    _describe = _lambda_sources._lambda_description

    def _lambda_description_tolerant(f, *args, **kwargs):
        try:
            return _describe(f, *args, **kwargs)
        except (SystemError, RecursionError):
            return "lambda *args, **kwargs: <unknown>"

    _lambda_sources._lambda_description = _lambda_description_tolerant
except (ImportError, AttributeError):  # another Hypothesis layout: nothing to patch
    pass

# Public addresses (outside every network WebhookURLGuard blocks).
PUBLIC_HOSTS = ("1.1.1.1", "8.8.8.8", "9.9.9.9", "93.184.215.14", "151.101.1.69", "140.82.112.3")
PATH_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@"
schemathesis.openapi.format(
    "webhook-url",
    st.builds(
        lambda host, port, path, query: f"https://{host}{port}/{path}{query}",
        st.sampled_from(PUBLIC_HOSTS),
        st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}")),
        st.text(PATH_CHARS + "/", max_size=40),
        st.one_of(st.just(""), st.text(PATH_CHARS + "/?", max_size=20).map(lambda q: "?" + q)),
    ),
)

APP_PATHS = ("/admin/v1/apps", "/admin/v1/apps/{appId}")


def _overlaps(parts, other):
    shorter = min(len(parts), len(other))
    return parts[:shorter] == other[:shorter]


def _separate(descriptors):
    if not isinstance(descriptors, list):
        return
    seen = []
    for index, item in enumerate(descriptors):
        path = item.get("path") if isinstance(item, dict) else None
        if not isinstance(path, str):
            continue
        parts = path.split(".")
        if any(_overlaps(parts, other) for other in seen):
            fresh = f"fuzz{index}"
            while any(_overlaps([fresh], other) for other in seen):
                fresh += "x"
            item["path"] = fresh
            parts = [fresh]
        seen.append(parts)


@schemathesis.hook
def before_call(context, case, **kwargs):
    meta = getattr(case, "meta", None)
    if meta is not None and not meta.generation.mode.is_positive:
        return
    if case.operation.path in APP_PATHS and case.method.upper() in ("POST", "PATCH") and isinstance(case.body, dict):
        _separate(case.body.get("metaData"))
        _separate(case.body.get("metaDataInvite"))
