// Anchor of the C++ test programs' shared precompiled header (tests/pch/CMakeLists.txt): a program,
// so that the header is built with the flags the test programs get (-fPIE, not a library's -fPIC).
int main() { return 0; }
