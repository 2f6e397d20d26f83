// The one way back for the shims' error messages (shim.h).

#include <cstdlib>

extern "C" void golow_free_error(char *message) { std::free(message); }
