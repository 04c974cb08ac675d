# Torch-free verifier tests: challenge policy, planner, verdict and reports. Included by
# tests/verifier/CMakeLists.txt.
vt_test(verifier_policy_test SOURCES policy_test.cpp LIBS vt_verifier LABELS unit)
vt_test(verifier_plan_test SOURCES plan_test.cpp LIBS vt_verifier LABELS unit)
vt_test(verifier_report_test SOURCES report_test.cpp LIBS vt_verifier LABELS unit)
# Renders report.html in headless Chromium; skips itself where chromium is absent.
vt_test(verifier_html_render_test SOURCES html_render_test.cpp LIBS vt_verifier LABELS integration)
vt_test(verifier_economics_policy_test SOURCES economics_policy_test.cpp LIBS vt_verifier LABELS unit)
vt_test(verifier_report_page_test SOURCES report_page_test.cpp LIBS vt_verifier LABELS unit)
vt_test(verifier_verify_state_test SOURCES verify_state_test.cpp LIBS vt_verifier LABELS unit)
