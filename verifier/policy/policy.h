#pragma once
// The challenge policy (docs/plan.md): which epochs a verifier re-runs, drawn from its own
// secret randomness so that a provider can predict neither how many checks come nor where.
//
// One header per part: probability.h (p from a confidence, a fixed p or the economics, and what
// it guarantees), challenge_random.h (the secret stream the draws read), movement.h (how far
// each epoch moved) and challenges.h (the boost rule and the draws). This one includes them all.

#include "verifier/policy/challenge_random.h"
#include "verifier/policy/challenges.h"
#include "verifier/policy/movement.h"
#include "verifier/policy/probability.h"
