#!/usr/bin/env python3
"""Regenerates tests/data/dsv4-encoding/extra_cases.json with DeepSeek's reference encoder.

    python3 tests/text/make_chat_cases.py path/to/encoding_dsv4.py > tests/data/dsv4-encoding/extra_cases.json

Each case records the reference's output for hand-written inputs that the four published
vectors do not reach (chat mode, tool-result ordering, argument types, tasks, context,
reasoning effort, wo_eos, parsing of tool calls, the errors it raises), so that the C++
chat format is checked against the reference byte for byte without Python at test time.
"""
import importlib.util
import json
import sys

spec = importlib.util.spec_from_file_location("encoding_dsv4", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


ENCODE_CASES = [
    ("chat mode, multi-turn", "chat", {}, [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "greet"},
        {"role": "user", "content": "2+2?"}]),
    ("thinking, generation prompt", "thinking", {}, [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"}]),
    ("thinking, drop_thinking=False keeps earlier reasoning", "thinking", {"drop_thinking": False}, [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"}]),
    ("thinking, earlier reasoning dropped", "thinking", {}, [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2", "reasoning_content": "r2"}]),
    ("tool results sorted by call order, user text merged", "thinking", {}, [
        {"role": "system", "content": "sys", "tools": [WEATHER_TOOL]},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "reasoning_content": "two calls",
         "tool_calls": [call("a", "get_weather", '{"city": "Paris"}'), call("b", "get_weather", '{"city": "Rome", "days": 3}')]},
        {"role": "tool", "tool_call_id": "b", "content": "Rome: 20C"},
        {"role": "tool", "tool_call_id": "a", "content": "Paris: 18C"},
        {"role": "user", "content": "And tomorrow?"}]),
    ("argument types", "chat", {}, [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("x", "f", json.dumps(
            {"n": 3, "flag": True, "none": None, "pi": 3.14, "one": 1.0, "tiny": 1e-05, "big": 1e16, "neg": -0.5,
             "items": [1, 2.5, "s"], "obj": {"k": "v", "ü": "ß"}, "text": "line1\nline2 \"quoted\" 中文",
             "ctrl": "\t\u0001", "empty": ""}, ensure_ascii=False)),
            call("y", "g", "not json at all"), call("z", "h", "{}")]}]),
    ("response format and tools in chat mode", "chat", {}, [
        {"role": "system", "content": "sys", "tools": [WEATHER_TOOL],
         "response_format": {"type": "json_schema", "schema": {"type": "object"}}},
        {"role": "user", "content": "hello"}]),
    ("reasoning effort max", "thinking", {"reasoning_effort": "max"}, [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "hard problem"}]),
    ("reasoning effort high", "thinking", {"reasoning_effort": "high"}, [
        {"role": "user", "content": "problem"}]),
    ("tasks", "thinking", {}, [
        {"role": "user", "content": "q", "task": "query"},
        {"role": "assistant", "content": "search terms"},
        {"role": "user", "content": "q2", "task": "action"},
        {"role": "assistant", "content": "Search"},
        {"role": "user", "content": "q3", "task": "authority"}]),
    ("title task on an assistant turn", "chat", {}, [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "answer", "task": "title"},
        {"role": "assistant", "content": "A title"}]),
    ("wo_eos and latest_reminder after the user", "thinking", {}, [
        {"role": "user", "content": "q"},
        {"role": "latest_reminder", "content": "2025-01-01"},
        {"role": "assistant", "content": "partial", "reasoning_content": "r", "wo_eos": True}]),
    ("tool content blocks, null and list", "thinking", {"drop_thinking": False}, [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [call("1", "f", "{}"), call("2", "f", "{}")]},
        {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "part1"}, {"type": "image"},
                                                         {"type": "text", "text": "part2"}]},
        {"role": "tool", "tool_call_id": "2", "content": None}]),
    ("developer with tools and response format", "thinking", {}, [
        {"role": "system", "content": "sys"},
        {"role": "developer", "content": "dev says", "tools": [WEATHER_TOOL], "response_format": {"a": 1}},
        {"role": "assistant", "content": "ok", "reasoning_content": "think"},
        {"role": "developer", "content": "again"}]),
    ("earlier developer turn dropped", "thinking", {}, [
        {"role": "developer", "content": "dev1"},
        {"role": "assistant", "content": "a1", "reasoning_content": "r1"},
        {"role": "user", "content": "u2"}]),
    ("no BOS", "chat", {"add_default_bos_token": False}, [{"role": "user", "content": "x"}]),
    ("empty conversation", "thinking", {}, []),
    ("ends with an assistant turn, null fields", "thinking", {}, [
        {"role": "system", "content": None},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "reasoning_content": None}]),
    ("context: continue after an encoded prefix", "thinking",
     {"context": [{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"},
                  {"role": "assistant", "content": "a1", "reasoning_content": "r1"}]},
     [{"role": "user", "content": "q2"}]),
    ("context with tool calls, results sorted across the boundary", "thinking",
     {"context": [{"role": "user", "content": "q"},
                  {"role": "assistant", "content": "", "tool_calls": [call("a", "f", "{}"), call("b", "f", "{}")]}]},
     [{"role": "tool", "tool_call_id": "b", "content": "B"}, {"role": "tool", "tool_call_id": "a", "content": "A"}]),
    ("context, chat mode", "chat",
     {"context": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]},
     [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}, {"role": "user", "content": "q3"}]),
]

PARSE_CASES = [
    ("thinking, plain", "thinking", "Simple arithmetic.</think>2 + 2 = 4.<｜end▁of▁sentence｜>"),
    ("chat, plain", "chat", "Hello there.\nSecond line.<｜end▁of▁sentence｜>"),
    ("thinking, tool calls", "thinking",
     "Need weather.</think>Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
     "<｜DSML｜parameter name=\"city\" string=\"true\">Paris \"centre\"\nline2</｜DSML｜parameter>\n"
     "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
     "<｜DSML｜parameter name=\"opts\" string=\"false\">{\"a\": [1, 2]}</｜DSML｜parameter>\n"
     "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"noop\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"),
    ("chat, tool calls without EOS", "chat",
     "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">1</｜DSML｜parameter>\n"
     "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"),
    ("name with a trailing extra newline", "chat",
     "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke  name=\"f\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"),
    ("error: missing </think>", "thinking", "no end of thinking<｜end▁of▁sentence｜>"),
    ("error: missing EOS", "chat", "no eos"),
    ("error: text after EOS", "chat", "a<｜end▁of▁sentence｜>b"),
    ("error: special token in content", "thinking", "r</think>a<think>b<｜end▁of▁sentence｜>"),
    ("error: duplicate parameter", "chat",
     "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">1</｜DSML｜parameter>\n"
     "<｜DSML｜parameter name=\"x\" string=\"true\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"),
    ("error: bad parameter", "chat",
     "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"maybe\">1</｜DSML｜parameter>\n"
     "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"),
    ("error: content after tool calls", "chat",
     "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>tail<｜end▁of▁sentence｜>"),
]

ERROR_CASES = [
    ("unknown role", "chat", {}, [{"role": "robot", "content": "x"}]),
    ("developer without content", "chat", {}, [{"role": "developer", "content": ""}]),
    ("invalid task", "chat", {}, [{"role": "user", "content": "x", "task": "dance"}]),
    ("invalid reasoning effort", "thinking", {"reasoning_effort": "low"}, [{"role": "user", "content": "x"}]),
]


def main():
    out = {"generated_by": "tests/text/make_chat_cases.py from DeepSeek's encoding/encoding_dsv4.py",
           "encode": [], "parse": []}
    for name, mode, options, messages in ENCODE_CASES:
        out["encode"].append({"name": name, "mode": mode, "options": options, "messages": messages,
                              "expected": ref.encode_messages(messages, thinking_mode=mode, **options)})
    for name, mode, options, messages in ERROR_CASES:
        try:
            ref.encode_messages(messages, thinking_mode=mode, **options)
            raise SystemExit(f"expected an error for {name}")
        except (AssertionError, NotImplementedError, ValueError, KeyError):
            pass
        out["encode"].append({"name": name, "mode": mode, "options": options, "messages": messages, "error": True})
    for name, mode, text in PARSE_CASES:
        case = {"name": name, "mode": mode, "completion": text}
        try:
            case["expected"] = ref.parse_message_from_completion_text(text, thinking_mode=mode)
        except (AssertionError, ValueError):
            case["error"] = True
        out["parse"].append(case)
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


main()
