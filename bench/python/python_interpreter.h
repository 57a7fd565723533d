// The Python interpreter that has the tessera package, for commands that run Python code: the
// `python3` next to this executable (pip puts both into the environment's bin folder), else
// $TESSERA_PYTHON, else `python3` on PATH. $TESSERA_PYTHON wins when set.
#pragma once

#include <string>

namespace tessera::bench {

std::string python_interpreter();

}  // namespace tessera::bench
