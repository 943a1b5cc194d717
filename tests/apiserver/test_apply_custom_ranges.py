"""Server-side apply of a custom resource is judged as its other writes are: upstream decodes a custom
resource into no Go struct, so an applied value that its schema's format or bounds refuse is the custom
resource validation's 422, as a merge patch's is. fuzz58 found such applies answered with a Go decoder's
400 ("cannot be handled as a Oddity: json: cannot unmarshal number 2147483648 into Go struct field
struct.spec.count of type int32"), as a built-in kind's apply is (tests/apiserver/patch/test_typed.py)."""

from __future__ import annotations

from tests.apiserver.apiextensions import install
from tests.apiserver.apiextensions.test_number_format_ranges import CRD, PATH, pool
from tests.served import send, served

APPLY = "application/apply-patch+yaml"


async def test_an_applied_value_is_judged_by_the_custom_resources_validation(tmp_path):
    async with served(tmp_path) as (_, api):
        await install(api, CRD, PATH)
        assert (await send(api, "POST", PATH, pool("p", {"replicas": 1})))[0] == 201
        for spec, field in [({"limit": 2**31}, "spec.limit"), ({"limit": 2**63}, "spec.limit"),
                            ({"replicas": 1.5}, "spec.replicas")]:
            applied = await send(api, "PATCH", f"{PATH}/p?fieldManager=m&force=true", pool("p", spec), APPLY)
            patched = await send(api, "PATCH", f"{PATH}/p", {"spec": spec}, "application/merge-patch+json")
            for code, got in (applied, patched):
                assert code == 422 and got["reason"] == "Invalid", (spec, got)
                assert any(c["field"] == field for c in got["details"]["causes"]), (spec, got)
            assert applied[1]["details"]["causes"] == patched[1]["details"]["causes"], spec
        # nothing of them was kept
        code, got = await send(api, "GET", f"{PATH}/p")
        assert code == 200 and got["spec"] == {"replicas": 1}
