"""ClaudeAgentOptions fields, listed statically so `ce compile` never imports the SDK.

`tests/test_sdk_options.py` checks these lists against the installed claude-agent-sdk.
"""

# Fields ce sets itself from the task (agent.*, run_limits.*, the sandbox, the trace sink).
MANAGED = frozenset({
    "allowed_tools", "can_use_tool", "cli_path", "continue_conversation", "cwd",
    "debug_stderr", "disallowed_tools", "env", "fork_session", "hooks", "max_budget_usd",
    "max_turns", "mcp_servers", "model", "permission_mode", "plugins", "resume",
    "resume_drops_turn", "resume_session_at", "session_id", "session_store",
    "session_store_flush", "setting_sources", "stderr", "system_prompt",
})

# Fields a task may pass through under `agent.sdk_options`.
PASS_THROUGH = frozenset({
    "add_dirs", "agents", "betas", "client_app", "effort", "enable_file_checkpointing",
    "extra_args", "fallback_model", "forward_subagent_text", "include_hook_events",
    "include_partial_messages", "load_timeout_ms", "max_buffer_size", "max_thinking_tokens",
    "output_format", "permission_prompt_tool_name", "sandbox", "settings", "skills",
    "strict_mcp_config", "task_budget", "thinking", "tools", "user", "verbatim_prompts",
})
