cca_add_test(NAME test_docs SOURCES test_docs.c LIBS ccalloc_static LABEL cpu)
