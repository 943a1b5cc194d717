"""A ValidatingAdmissionPolicy's variables over HTTP, with the official client: each is handed to
the CEL engine once per request (as the engine's optional value holding it, whose field selection
yields the value), not again for every expression after it; what expressions read through
`variables.<name>` stays the value, null included, and a variable that failed stays an error."""

from __future__ import annotations

import asyncio
import json

from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.apiserver.admission.test_cel_cost import bind, policy
from tests.controllers import tries
from tests.served import served


async def test_variables_read_by_field_index_optional_selection_and_has(tmp_path):
    variables = [{"name": "items", "expression": "object.data.csv.split(',')"},
                 {"name": "count", "expression": "variables.items.size()"},
                 {"name": "doubled", "expression": "variables.items.map(s, s + s)"},
                 {"name": "first", "expression": "variables.doubled[0]"},
                 {"name": "meta", "expression": "object.metadata"},
                 {"name": "nothing", "expression": "null"},
                 {"name": "broken", "expression": "object.data.missing"}]
    validations = [{"expression": "variables.count == 3 && variables.first == 'aa' && has(variables.meta.name) && "
                                  "variables.nothing == null && variables.doubled.all(s, s.size() == 2)"},
                   {"expression": "variables.?items.orValue([]).size() == 3 && variables['count'] == 3"},
                   {"expression": "object.metadata.name != 'broken' || variables.broken == 'x'"}]
    async with served(tmp_path) as (_, api_client):
        admission, core = client.AdmissionregistrationV1Api(api_client), client.CoreV1Api(api_client)
        await bind(admission, "vars", policy("vars", validations, variables=variables))

        async def create(name: str, csv: str) -> tuple[int, str]:
            body = {"metadata": {"name": name}, "data": {"csv": csv}}
            try:
                await asyncio.to_thread(core.create_namespaced_config_map, "default", body, dry_run="All")
            except ApiException as e:
                return e.status, json.loads(e.body)["message"]
            return 201, ""

        for _ in tries():  # the policy takes effect once the source has seen it
            if (await create("probe", "a,b"))[0] == 422:
                break
            await asyncio.sleep(0.05)
        assert await create("fits", "a,b,c") == (201, "")
        assert await create("short", "a,b") == (422, 'configmaps "short" is forbidden: ValidatingAdmissionPolicy '
                                                     "'vars' with binding 'vars' denied request: failed expression: "
                                                     + validations[0]["expression"])
        assert await create("broken", "a,b,c") == (422, 'configmaps "broken" is forbidden: ValidatingAdmissionPolicy '
                                                         "'vars' with binding 'vars' denied request: expression '"
                                                         + validations[2]["expression"] + "' resulted in error: "
                                                         'composited variable "broken" fails to evaluate: no such key: '
                                                         "missing")
