// Anchor of the libraries' shared precompiled header (src/pch/CMakeLists.txt).
