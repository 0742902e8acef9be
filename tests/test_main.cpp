// tests/test_main.cpp: doctest's main for every brrr test program.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
