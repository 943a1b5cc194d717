"""A list or watch whose fieldSelector pins metadata.name is a request for that object by name, as
upstream's RequestInfo makes it: RBAC's resourceNames allow it (how a kubelet or an operator watches
one Secret it may read), and its forbidden answer names the object."""

import asyncio
import json

from tests.served import send, served

MALLORY = {"Impersonate-User": "mallory"}


async def _as_mallory(api, path):
    def call():
        r = api.rest_client.pool_manager.request("GET", api.configuration.host + path, headers=MALLORY)
        return r.status, json.loads(r.data)
    return await asyncio.to_thread(call)


async def test_resource_names_allow_a_list_or_watch_of_that_name_only(tmp_path):
    async with served(tmp_path) as (_, api):
        for name in ("mine", "theirs"):
            assert (await send(api, "POST", "/api/v1/namespaces/default/secrets",
                               {"metadata": {"name": name}, "stringData": {"k": name}}))[0] == 201
        rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default"
        assert (await send(api, "POST", f"{rbac}/roles", {"metadata": {"name": "one"}, "rules": [
            {"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine"]}]}))[0] == 201
        assert (await send(api, "POST", f"{rbac}/rolebindings", {
            "metadata": {"name": "one"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one"},
            "subjects": [{"kind": "User", "name": "mallory"}]}))[0] == 201
        secrets = "/api/v1/namespaces/default/secrets"

        code, body = await _as_mallory(api, f"{secrets}?fieldSelector=metadata.name%3Dmine")
        assert code == 200 and [s["metadata"]["name"] for s in body["items"]] == ["mine"]
        # another term beside it narrows the list further: still that one name (RequiresExactMatch)
        code, body = await _as_mallory(api, f"{secrets}?fieldSelector=type%3DOpaque,metadata.name%3D%3Dmine")
        assert code == 200 and len(body["items"]) == 1
        code, body = await _as_mallory(api, f"{secrets}?fieldSelector=metadata.name%3Dmine&watch=true&timeoutSeconds=1")
        assert code == 200 and (body["type"], body["object"]["metadata"]["name"]) == ("ADDED", "mine")

        code, body = await _as_mallory(api, f"{secrets}?fieldSelector=metadata.name%3Dtheirs")
        assert (code, body["message"]) == (403, 'secrets "theirs" is forbidden: User "mallory" cannot list resource '
                                                '"secrets" in API group "" in the namespace "default"')
        for selector in ("", "?fieldSelector=metadata.name!%3Dtheirs", "?fieldSelector=metadata.name%3Dmine%2Fx"):
            code, body = await _as_mallory(api, secrets + selector)
            assert (code, body["message"]) == (403, 'secrets is forbidden: User "mallory" cannot list resource '
                                                    '"secrets" in API group "" in the namespace "default"')
