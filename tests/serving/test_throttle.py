"""Failed logins slow down, per client and for everyone, and the right password clears a client's count."""

import logging

import pytest

from minimind.serving.throttle import FREE_TRIES, MAX_CLIENTS, MAX_WAIT_S, LoginThrottle, retry_after


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_client_gets_free_tries_then_waits_that_double(caplog):
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    with caplog.at_level(logging.WARNING, logger="minimind.serving.throttle"):
        for _ in range(FREE_TRIES - 1):
            assert throttle.wait("1.2.3.4") == 0
            throttle.failed("1.2.3.4")
        assert throttle.wait("1.2.3.4") == 0 and not caplog.records  # the free tries cost nothing
        waits = []
        for _ in range(4):
            throttle.failed("1.2.3.4")
            waits.append(throttle.wait("1.2.3.4"))
            clock.now += waits[-1]
    assert waits == [1.0, 2.0, 4.0, 8.0]  # from the FREE_TRIES-th failure on
    assert len(caplog.records) == 4 and "1.2.3.4 failed 8 times" in caplog.records[-1].getMessage()  # one per lockout
    assert throttle.wait("5.6.7.8") == 0  # another client is not slowed
    throttle.succeeded("1.2.3.4")
    throttle.failed("1.2.3.4")
    assert throttle.wait("1.2.3.4") == 0  # the right password cleared the count


def test_the_wait_is_capped_and_retry_after_is_whole_seconds():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    for _ in range(FREE_TRIES + 40):
        throttle.failed("x")
        clock.now += 61  # slowly: the global count never fills
    clock.now -= 61
    assert throttle.wait("x") == MAX_WAIT_S
    assert retry_after(0.2) == {"Retry-After": "1"} and retry_after(899.1) == {"Retry-After": "900"}


def test_many_addresses_guessing_slow_down_everyone_for_the_rest_of_the_minute():
    clock = Clock()
    throttle = LoginThrottle(clock=clock, global_per_minute=20)
    for n in range(20):
        throttle.failed(f"10.0.0.{n}")
        clock.now += 1
    assert throttle.wait("192.168.1.1") == pytest.approx(60 - 20)  # a new address waits too
    clock.now += 41
    assert throttle.wait("192.168.1.1") == 0


def test_clients_remembered_are_bounded():
    throttle = LoginThrottle(clock=Clock(), global_per_minute=10**9)
    for n in range(MAX_CLIENTS + 50):
        throttle.failed(f"c{n}")
    assert len(throttle._clients) == MAX_CLIENTS


def test_the_client_is_the_peer_unless_a_proxy_header_is_named():
    scope = {"client": ("127.0.0.1", 5555)}
    headers = {"x-forwarded-for": "6.6.6.6, 10.1.1.1"}
    assert LoginThrottle().client(scope, headers) == "127.0.0.1"  # a header a client can forge is ignored
    behind_proxy = LoginThrottle.from_env({"MINIMIND_CLIENT_IP_HEADER": "X-Forwarded-For"})
    assert behind_proxy.client(scope, headers) == "10.1.1.1"  # the address the proxy itself saw
    assert behind_proxy.client(scope, {}) == "127.0.0.1"


def test_tries_in_flight_count_as_failures_until_they_come_back():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    begun = 0
    for _ in range(150):  # a burst of login posts, all sent before any is answered
        if throttle.wait("1.2.3.4") == 0:
            throttle.begin("1.2.3.4")
            begun += 1
    assert begun == FREE_TRIES and throttle.wait("9.9.9.9") == 0  # others are not slowed
    for _ in range(begun):
        throttle.end("1.2.3.4", False)
    assert throttle.wait("1.2.3.4") == 1.0
    clock.now += 1
    throttle.begin("1.2.3.4")  # after the wait: one try, and nothing else while it is out
    assert throttle.wait("1.2.3.4") == 1.0
    throttle.end("1.2.3.4", True)  # the right password
    assert throttle.wait("1.2.3.4") == 0 and throttle._flying == {}
    throttle.begin("5.5.5.5")
    throttle.end("5.5.5.5", None)  # a malformed form: neither outcome
    assert throttle._clients.get("5.5.5.5") is None and throttle._flying == {}
