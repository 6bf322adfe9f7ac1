# `cmake --install build [--prefix DIR]`: the program, the shared libraries, the public headers
# and a pkg-config file, so `pkg-config --cflags --libs specd` builds a program against libspecd.
# libspecd.so carries llama.cpp inside it (linked statically, its symbols hidden), so it needs
# nothing else installed; the static libspecd.a is not installed, since it would need a matching
# static llama.cpp beside it.
install(TARGETS specd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS specd_shared specd_rpc_shared specd_rpcserver
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/specd.h include/specd_rpc.h include/rpcserver.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The prefix is taken relative to the .pc file, so `cmake --install --prefix DIR` anywhere works.
file(RELATIVE_PATH SPECD_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" SPECD_PC_TO_PREFIX "${SPECD_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/specd.pc.in ${CMAKE_BINARY_DIR}/specd.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/specd-rpc.pc.in ${CMAKE_BINARY_DIR}/specd-rpc.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/specd.pc ${CMAKE_BINARY_DIR}/specd-rpc.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
