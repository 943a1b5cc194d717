from nanokube.machinery.hostport import join_host_port


def test_an_ipv6_host_is_bracketed():
    assert join_host_port("fd00::2", 443) == "[fd00::2]:443"
    assert join_host_port("10.0.0.1", "8443") == "10.0.0.1:8443"
    assert join_host_port("api.wardle.svc", 443) == "api.wardle.svc:443"
