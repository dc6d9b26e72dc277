-- Tool calls behind write allowances (spend_write, 45_limits.sql). After 70_settle.sql: a decision
-- answers decision_effects.

-- limited_decide: a Tool's decision behind a write allowance, for the calls that spend one (a
-- person's over MCP; the Agent's when AGENT_TOOL_CALL_LIMIT is set). call_tool_v3 runs it as the
-- decision (p_decide) when the service names it; p_context carries the Tool's own decision function
-- ("decide") and the allowance ("allowance": {"principals": [...], "window": seconds, "max": calls}).
-- Each new call spends one `tool_call` against every principal, in the call's own statement (a
-- replay never reaches a decision, so it spends nothing); past an allowance it raises
-- `tool_call_limited` (SQLSTATE P0001, DETAIL the seconds to the window's end): the statement rolls
-- back, the count with it, nothing is recorded, and the service answers 429 too_many_requests with
-- Retry-After, so the same call may be made again once the window ends. A call the Tool refuses
-- (409, recorded) has spent its allowance: what is recorded is counted.
CREATE OR REPLACE FUNCTION limited_decide(
    p_tool_call_id text, p_conversation_id text, p_arguments jsonb, p_context jsonb,
    OUT outcome text, OUT response jsonb, OUT effects decision_effects)
LANGUAGE plpgsql AS $$
DECLARE
    allowance jsonb := p_context -> 'allowance';
    retry_in double precision;
    decided record;
BEGIN
    retry_in := spend_write(
        ARRAY(SELECT jsonb_array_elements_text(allowance -> 'principals')), 'tool_call', 0,
        (allowance ->> 'window')::integer, (allowance ->> 'max')::integer, 9223372036854775807);
    IF retry_in IS NOT NULL THEN
        RAISE EXCEPTION 'tool_call_limited' USING ERRCODE = 'P0001', DETAIL = retry_in::text;
    END IF;
    EXECUTE format('SELECT d.outcome, d.response, d.effects FROM %s($1, $2, $3, $4) d',
                   (p_context ->> 'decide')::regproc)
        INTO decided
        USING p_tool_call_id, p_conversation_id, p_arguments, p_context;
    outcome := decided.outcome;
    response := decided.response;
    effects := decided.effects;
END $$;
