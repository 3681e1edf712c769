# The installed package as its users meet it (scripts/test.sh, stage 3, builds
# and runs a consumer against one install; these check what one install
# cannot show):
#   test_pkgconfig   ccalloc.pc finds the header and library under every
#                    CMAKE_INSTALL_LIBDIR / INCLUDEDIR layout, the prefix moved
#                    too (configures the allocator alone; needs pkg-config)
add_test(NAME test_pkgconfig COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/allocator/contract/test_pkgconfig.sh
         ${PROJECT_SOURCE_DIR})
set_tests_properties(test_pkgconfig PROPERTIES LABELS cpu TIMEOUT 120)
