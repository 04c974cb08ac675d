# Torch-free verifier tests: challenge policy, planner, verdict and reports. Included by
# tests/verifier/CMakeLists.txt.
vt_test(verifier_policy_test SOURCES policy_test.cpp LIBS vt_verifier LABELS unit)
