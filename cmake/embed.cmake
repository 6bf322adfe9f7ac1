# Writes the bytes of IN as a C array named NAME (and NAME_size) into OUT, so a file such as the
# server's page is part of the binary (no files to install beside it). cmake -DIN= -DOUT= -DNAME= -P
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed.cmake: do not edit. */\n#include <stddef.h>\n"
  "const unsigned char ${NAME}[] = {\n${body}0x00};\nconst size_t ${NAME}_size = ${n_bytes};\n")
