// doctest entry point. <torch/torch.h> comes first: glog's CHECK must not replace doctest's.
#include <torch/torch.h>
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
