set(VT_VERIFIER_POLICY_SOURCES policy.cpp plan.cpp report.cpp html_page.cpp html_report.cpp report_folder.cpp evidence_page.cpp verify_state.cpp)
