"""docs/api.md against the server's source: every code it can send is documented, and the
checks catch what is not (a planted code, a planted event field)."""

from testkit.contract import event_problems, read_contract, undocumented_codes


def test_every_code_and_broadcast_reason_the_source_can_send_is_in_the_document():
    contract = read_contract()
    assert len(contract.codes) > 50 and len(contract.events) > 12 and contract.reasons, "the tables were read"
    assert undocumented_codes(contract) == []


def test_a_planted_code_or_reason_is_caught(tmp_path):
    (tmp_path / "planted.py").write_text(
        'raise ApiError(418, "teapot", "short and stout")\n'
        'hub.emit("error", code="planted_event", message="x")\n'
        'raise ApiError(500, "bad_json", "documented, but not with this status")\n'
        'raise WhipError("gremlins")\n')
    assert undocumented_codes(read_contract(), (tmp_path,)) == [
        "bad_json (500)", "planted_event (event)", "teapot (418)", "broadcast reason gremlins"]


def test_an_event_is_held_to_its_documented_fields():
    contract = read_contract()
    good = {"type": "interrupted", "session_id": "s", "t": 1.0, "utterance_id": "u", "played_ms": 40}
    assert event_problems(good, contract) == []
    assert event_problems({**good, "planted": 1}, contract) == ["interrupted: field 'planted' is not in docs/api.md"]
    assert event_problems({k: v for k, v in good.items() if k != "played_ms"}, contract) == [
        "interrupted: documented field 'played_ms' missing"]
    assert event_problems({**good, "type": "planted"}, contract) == ["event type 'planted' is not in docs/api.md"]
    optional = {"type": "transcript", "session_id": "s", "t": 1.0, "role": "user", "text": "hi", "final": True}
    assert event_problems(optional, contract) == event_problems({**optional, "utterance_id": "u"}, contract) == []
