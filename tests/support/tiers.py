"""The test tiers: the tests ``python -m pytest`` leaves out and CI runs next, with ``-m "slow or real_model"``.

``slow``: a long scenario (many threads or processes, a real server, a whole recorded session, a notebook, the
benchmark command), each over 3 s where measured on two busy cores (or over 6 s in a second measure); together they
took three quarters of the suite's time. A new long test says so with ``@pytest.mark.slow``; those below are marked
by id, so that a parametrized test keeps its short cases in the default run. ``real_model``: a test that runs a real
language model offline.
"""

from __future__ import annotations

import pytest

__all__ = ["SLOW", "mark_slow"]

#: Node ids (as ``pytest --collect-only -q`` prints them) of the tests marked ``slow`` here.
SLOW = frozenset(
    {
        "benchmarks/tests/test_benchmark_command.py::test_a_quick_run_writes_its_own_folder_labels_figures_quick_and_leaves_the_committed_results",
        "benchmarks/tests/test_benchmark_command.py::test_a_run_leaves_its_results_only_and_a_failed_run_leaves_no_folder",
        "benchmarks/tests/test_benchmark_command.py::test_the_stress_command_refuses_a_trajectory_folder_that_does_not_exist",
        "benchmarks/tests/test_fidelity_measure.py::test_the_measure_reports_recall_per_trajectory_and_runs_the_probes_only_with_an_endpoint",
        "benchmarks/tests/test_notebooks.py::test_controls_notebook_shows_what_superseded_results_save",
        "benchmarks/tests/test_notebooks.py::test_cost_curve_notebook_measures_quadratic_against_linear_run_after_run_leaving_no_files",
        "benchmarks/tests/test_notebooks.py::test_persistence_notebook_runs_on_sqlite_and_postgres",
        "benchmarks/tests/test_notebooks.py::test_persistence_notebook_without_a_server_runs_its_postgres_part_on_sqlite",
        "benchmarks/tests/test_notebooks.py::test_quickstart_compacts_a_thread_and_keeps_every_message",
        "tests/cli/test_cli.py::test_a_key_that_is_set_but_unusable_gets_one_line_and_status_1",
        "tests/cli/test_cli.py::test_consolidate_offline_on_the_demos_storage_exits_0_and_reports_the_real_counts",
        "tests/cli/test_cli.py::test_default_demo_is_a_long_session_that_compacts_and_costs_less",
        "tests/cli/test_cli.py::test_default_demo_writes_the_files_it_names",
        "tests/cli/test_cli.py::test_demo_into_a_read_only_folder_says_so_in_one_line",
        "tests/cli/test_cli.py::test_inspect_reads_a_copy_the_user_may_read_but_not_write",
        "tests/cli/test_inspect_sources.py::test_inspect_shows_a_thread_the_dev_server_serves",
        "tests/core/test_config.py::test_a_small_window_chat_runs_without_refusals_or_a_summary_every_turn[16000]",
        "tests/core/test_config.py::test_a_small_window_chat_runs_without_refusals_or_a_summary_every_turn[30000]",
        "tests/core/test_fidelity.py::test_the_latest_three_compacted_requests_are_verbatim_in_session_intent[cc_opus46_entire-cli_32parallel-config2]",
        "tests/core/test_trail_bound.py::test_a_codemod_agent_on_a_32k_window_ends_every_compaction_under_the_trigger",
        "tests/docs/test_docs_site.py::test_every_page_of_the_navigation_is_built_with_the_configuration_and_the_api_generated",
        "tests/docs/test_docs_site.py::test_every_public_name_is_in_the_api_reference",
        "tests/engine/test_background.py::test_a_worker_killed_mid_summary_loses_nothing_and_the_next_one_compacts_again",
        "tests/engine/test_background.py::test_random_conversations_compacted_in_the_background_break_no_invariant",
        "tests/engine/test_background_store.py::test_a_job_running_after_its_run_returned_does_not_use_the_store",
        "tests/engine/test_background_transcript.py::test_a_long_session_keeps_each_message_once_and_as_first_written[cc_sonnet45_entire-cli_303calls]",
        "tests/engine/test_overflow.py::test_real_trajectories_in_a_32k_window_have_no_failed_model_call[cc_opus45_entire-cli_71k_tool_output]",
        "tests/engine/test_overflow.py::test_real_trajectories_in_a_32k_window_have_no_failed_model_call[cc_opus45_entire-cli_maxparallel10]",
        "tests/engine/test_overflow.py::test_real_trajectories_in_a_32k_window_have_no_failed_model_call[cc_opus46_entire-cli_32parallel]",
        "tests/engine/test_overflow.py::test_real_trajectories_in_a_32k_window_have_no_failed_model_call[cc_opus46_entire-cli_nocompaction]",
        "tests/engine/test_overflow.py::test_real_trajectories_in_a_32k_window_have_no_failed_model_call[cc_sonnet45_entire-cli_303calls]",
        "tests/engine/test_overflow.py::test_real_trajectories_in_a_32k_window_have_no_failed_model_call[cc_sonnet45_entire-cli_orphan_start]",
        "tests/engine/test_retries.py::test_a_request_retried_after_a_worker_died_in_a_tool_sends_every_call_answered",
        "tests/engine/test_retries.py::test_a_request_retried_on_another_worker_after_a_kill_in_the_summary_is_remembered_once[postgres]",
        "tests/engine/test_retries.py::test_a_request_retried_on_another_worker_after_a_kill_in_the_summary_is_remembered_once[sqlite]",
        "tests/fronts/test_chatopenai.py::test_streamed_messages_show_the_agent_tokens_and_no_summarizer_tokens",
        "tests/fronts/test_deepagents.py::test_ours_replaces_deepagents_summarization_in_the_agent_and_its_subagent[async]",
        "tests/fronts/test_middleware.py::test_without_langchain_the_package_imports_and_the_middleware_says_what_to_install",
        "tests/fronts/test_nested_view.py::test_a_view_mode_agent_added_directly_as_a_node_is_refused_or_bounded[sync]",
        "tests/fronts/test_nested_view.py::test_a_view_mode_create_agent_added_directly_as_a_node_leaves_the_parent_bounded",
        "tests/fronts/test_thread_controls.py::test_a_temporary_folder_used_as_storage_is_removed_after_waiting_for_the_background_jobs[async]",
        "tests/scenarios/test_background_scenarios.py::test_a_manual_compact_whose_summarizer_fails_once_records_each_request_once[background]",
        "tests/scenarios/test_background_scenarios.py::test_a_manual_compact_whose_summarizer_fails_once_records_each_request_once[blocking]",
        "tests/scenarios/test_background_scenarios.py::test_after_compaction_runs_for_each_applied_summary_and_no_other",
        "tests/scenarios/test_background_scenarios.py::test_an_apps_answer_to_a_declined_call_never_becomes_an_orphan_result",
        "tests/scenarios/test_background_scenarios.py::test_the_gates_dedupe_never_changes_what_a_prepared_summary_covers",
        "tests/scenarios/test_background_scenarios.py::test_the_new_users_app_sends_no_request_over_the_trigger[async]",
        "tests/scenarios/test_background_scenarios.py::test_the_new_users_app_sends_no_request_over_the_trigger[sync]",
        "tests/scenarios/test_background_scenarios.py::test_the_transcript_keeps_the_order_in_which_messages_appeared[background]",
        "tests/scenarios/test_background_scenarios.py::test_the_transcript_keeps_the_order_in_which_messages_appeared[blocking]",
        "tests/scenarios/test_concurrency.py::test_fifty_threads_compact_at_once_without_leaking_or_tearing_lines",
        "tests/scenarios/test_concurrency.py::test_two_processes_append_to_one_transcript_in_whole_lines",
        "tests/scenarios/test_concurrency.py::test_two_threads_of_one_user_flushing_at_once_write_each_bullet_once[files]",
        "tests/scenarios/test_concurrency.py::test_two_threads_of_one_user_flushing_at_once_write_each_bullet_once[postgres-store]",
        "tests/scenarios/test_concurrency.py::test_two_workers_on_one_postgres_lose_repeat_and_misorder_nothing[graph-alternate]",
        "tests/scenarios/test_concurrency.py::test_two_workers_on_one_postgres_lose_repeat_and_misorder_nothing[graph-at-once]",
        "tests/scenarios/test_concurrency.py::test_two_workers_on_one_postgres_lose_repeat_and_misorder_nothing[middleware-alternate]",
        "tests/scenarios/test_concurrency.py::test_two_workers_on_one_postgres_lose_repeat_and_misorder_nothing[middleware-at-once]",
        "tests/scenarios/test_invariants.py::test_any_cut_of_any_conversation_keeps_a_valid_history",
        "tests/scenarios/test_invariants.py::test_random_conversations_under_random_faults_keep_every_invariant",
        "tests/scenarios/test_invariants.py::test_real_trajectories_with_compaction_every_few_calls_break_nothing[cc_opus45_entire-cli_71k_tool_output]",
        "tests/scenarios/test_invariants.py::test_real_trajectories_with_compaction_every_few_calls_break_nothing[cc_opus45_entire-cli_maxparallel10]",
        "tests/scenarios/test_invariants.py::test_real_trajectories_with_compaction_every_few_calls_break_nothing[cc_opus46_entire-cli_32parallel]",
        "tests/scenarios/test_invariants.py::test_real_trajectories_with_compaction_every_few_calls_break_nothing[cc_opus46_entire-cli_nocompaction]",
        "tests/scenarios/test_invariants.py::test_real_trajectories_with_compaction_every_few_calls_break_nothing[cc_sonnet45_entire-cli_303calls]",
        "tests/scenarios/test_invariants.py::test_real_trajectories_with_compaction_every_few_calls_break_nothing[cc_sonnet45_entire-cli_orphan_start]",
        "tests/scenarios/test_invariants.py::test_the_compiled_graph_keeps_every_invariant",
        "tests/scenarios/test_invariants.py::test_the_gate_plan_never_evicts_a_leading_system_message_or_the_latest_request",
        "tests/scenarios/test_postgres_skip.py::test_in_ci_a_missing_server_fails_the_run",
        "tests/scenarios/test_postgres_skip.py::test_without_a_server_the_postgres_cases_skip_with_one_line_and_the_others_run",
        "tests/scenarios/test_studio.py::test_studio_form_shows_messages_and_the_context_not_the_compaction_key",
        "tests/scenarios/test_studio.py::test_the_agent_searches_memory_and_asks_for_compaction_on_the_dev_server",
        "tests/scenarios/test_trajectories.py::test_every_model_call_gets_a_valid_view_under_the_trigger[cc_opus45_entire-cli_71k_tool_output]",
        "tests/scenarios/test_trajectories.py::test_every_model_call_gets_a_valid_view_under_the_trigger[cc_opus45_entire-cli_maxparallel10]",
        "tests/scenarios/test_trajectories.py::test_every_model_call_gets_a_valid_view_under_the_trigger[cc_opus46_entire-cli_32parallel]",
        "tests/scenarios/test_trajectories.py::test_every_model_call_gets_a_valid_view_under_the_trigger[cc_opus46_entire-cli_nocompaction]",
        "tests/scenarios/test_trajectories.py::test_every_model_call_gets_a_valid_view_under_the_trigger[cc_sonnet45_entire-cli_303calls]",
        "tests/scenarios/test_trajectories.py::test_every_model_call_gets_a_valid_view_under_the_trigger[cc_sonnet45_entire-cli_orphan_start]",
        "tests/scenarios/test_trajectories.py::test_replay_with_sqlite_checkpointer[oh_claude35_swebv_django-11292]",
        "tests/scenarios/test_workers.py::test_with_two_workers_each_summary_is_prepared_by_one_worker_only[background]",
        "tests/scenarios/test_workers.py::test_with_two_workers_each_summary_is_prepared_by_one_worker_only[blocking]",
        "tests/scenarios/test_workers.py::test_workers_killed_and_restarted_with_failing_summarizers_and_outages_lose_and_stall_nothing",
        "tests/storage/test_checkpointers.py::test_an_idle_thread_stores_its_compaction_value_again_before_a_load_reads_far_back",
        "tests/storage/test_checkpointers.py::test_durability_exit_keeps_one_checkpoint_per_run_and_the_same_compaction",
        "tests/storage/test_checkpointers.py::test_sqlite_checkpoint_bytes_grow_by_a_constant_amount_per_turn_with_and_without_compaction",
        "tests/storage/test_isolation.py::test_each_id_reads_back_only_its_own_transcript_and_memory",
        "tests/storage/test_properties.py::test_a_huge_parallel_round_at_the_default_prompt_cache_is_brought_under_the_trigger",
        "tests/storage/test_properties.py::test_compacted_view_obeys_provider_rules",
        "tests/storage/test_properties.py::test_only_the_leading_system_messages_are_pinned",
        "tests/storage/test_properties.py::test_retried_runs_unanswered_calls_and_two_workers_keep_history_valid_and_memory_once",
        "tests/storage/test_properties.py::test_retried_runs_unanswered_calls_and_two_workers_send_no_request_over_the_window",
        "tests/storage/test_properties.py::test_runs_with_colliding_or_no_thread_ids_never_read_each_others_transcript",
        "tests/storage/test_properties.py::test_the_trail_keeps_to_its_budget_and_accounts_for_every_changed_file",
        "tests/storage/test_storage_cases.py::test_two_workers_writing_the_same_thread_store_each_message_once[files]",
        "tests/storage/test_storage_cases.py::test_two_workers_writing_the_same_thread_store_each_message_once[postgres-store]",
    }
)


def mark_slow(items: list[pytest.Item]) -> None:
    """Mark the collected tests that `SLOW` names (each once, however many conftests call this)."""
    for item in items:
        if item.nodeid in SLOW and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
