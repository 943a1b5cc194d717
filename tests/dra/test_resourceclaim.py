"""How a pod's claims are named and when a claim is reserved for it."""

import pytest

from nanokube.dra.resourceclaim import ClaimError, claim_name, claim_names, pod_claims, reserved_for_pod

POD = {"metadata": {"name": "p", "namespace": "ns"},
       "spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "fixed"},
                                   {"name": "b", "resourceClaimTemplateName": "t"},
                                   {"name": "c", "resourceClaimTemplateName": "t"}]},
       "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-x1"}]}}


def test_generated_claims_are_named_by_the_pod_status():
    assert pod_claims(POD) == [("a", "fixed"), ("b", "p-b-x1"), ("c", None)]
    assert claim_names(POD) == {"fixed", "p-b-x1"}
    a, b, c = POD["spec"]["resourceClaims"]
    assert claim_name(POD, a) == ("fixed", False)
    assert claim_name(POD, b) == ("p-b-x1", True), "a generated claim must be the pod's own"
    with pytest.raises(ClaimError, match='pod "ns/p": ResourceClaim not created yet'):
        claim_name(POD, c)


def test_a_template_entry_whose_status_says_no_claim_needs_none():
    pod = {**POD, "status": {"resourceClaimStatuses": [{"name": "c"}]}}
    assert claim_name(pod, POD["spec"]["resourceClaims"][2]) == (None, True)


def test_reservation_counts_for_the_pod_or_its_pod_group():
    pod = {"metadata": {"uid": "u1"}, "spec": {"schedulingGroup": {"podGroupName": "g"}}}
    mine = {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}}
    other = {"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u2"}]}}
    group = {"status": {"reservedFor": [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g",
                                         "uid": "g1"}]}}
    assert reserved_for_pod(mine, pod) and reserved_for_pod(group, pod)
    assert not reserved_for_pod(other, pod)
    assert not reserved_for_pod(group, {"metadata": {"uid": "u1"}, "spec": {}})
