# The installed package as its users meet it (scripts/test.sh, stage 3, builds
# and runs a consumer against one install; these check what one install
# cannot show):
#   test_pkgconfig   ccalloc.pc finds the header and library under every
#                    CMAKE_INSTALL_LIBDIR / INCLUDEDIR layout, the prefix moved
#                    too (configures the allocator alone; needs pkg-config)
#   test_header      ccalloc.h compiles with -Werror in C99-C17 and C++11-20
#                    (gcc, clang), included twice, every macro used, after a
#                    program's printf macro; every name it defines prefixed
#   test_soname      ccalloc.h's version is the package's and the library's;
#                    the soname changes when the package calls versions
#                    incompatible (0.MINOR before 1.0)
#   test_abi         the library's ABI is the one recorded for its soname
#                    (allocator/abi/SONAME.abi; libabigail's abidw and
#                    abidiff, skipped without them) and ccalloc.h's macros
#                    recorded beside it (allocator/abi/SONAME.macros)
#   test_abi_fails   test_abi fails on a struct's size or a function the
#                    record lacks, and on a macro's value changed, one removed
#                    or added (what abidiff cannot see), from a path with spaces
#   test_package_deps  the package built with CCA_CUDA_RUNTIME=dlopen asks a
#                    consumer for no CUDA toolkit (configures only; where
#                    the toolkit's headers exist, as dlopen needs them)
add_test(NAME test_pkgconfig COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_pkgconfig.sh
         ${PROJECT_SOURCE_DIR})
set_tests_properties(test_pkgconfig PROPERTIES LABELS cpu TIMEOUT 120)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_test(NAME test_soname COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_soname.sh
           $<TARGET_FILE:ccalloc> ${PROJECT_SOURCE_DIR}/allocator/include/ccalloc.h
           ${PROJECT_BINARY_DIR}/allocator/ccallocConfigVersion.cmake)
  set_tests_properties(test_soname PROPERTIES LABELS cpu TIMEOUT 30)
  add_test(NAME test_abi COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_abi.sh
           $<TARGET_FILE:ccalloc> ${PROJECT_SOURCE_DIR})
  add_test(NAME test_abi_fails COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_abi_fails.sh
           $<TARGET_FILE:ccalloc> ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_abi test_abi_fails PROPERTIES LABELS cpu TIMEOUT 60 SKIP_RETURN_CODE 77
                       ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
endif()
if(CCA_WITH_CUDA)
  add_test(NAME test_package_deps COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_package_deps.sh
           ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_package_deps PROPERTIES LABELS cpu TIMEOUT 120)
endif()
add_test(NAME test_header COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_header.sh
         ${PROJECT_SOURCE_DIR}/allocator/include)
set_tests_properties(test_header PROPERTIES LABELS cpu TIMEOUT 60)
