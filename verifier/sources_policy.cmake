set(VT_VERIFIER_POLICY_SOURCES policy.cpp plan.cpp report.cpp html_report.cpp provider_key.cpp)
