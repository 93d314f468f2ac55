#ifndef CHRONICLE_CXML2_SHIM_H
#define CHRONICLE_CXML2_SHIM_H
#include <libxml/xmlversion.h>
/* Debian builds libxml2 with ICU, whose headers clash with the ICU Foundation carries. Nothing
   here touches the converter structs that differ without it (we never read an encoding handler's
   fields), and libxml2 itself still converts with ICU. */
#undef LIBXML_ICU_ENABLED
#include <libxml/HTMLparser.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

/* libxml2 prints some errors (an encoding it cannot convert) to stderr whatever the parser's
   options say. Its error handlers are per thread: the page reader silences them on its own
   thread before each parse. The handler is variadic, which Swift cannot define. */
static void chronicle_xml_ignore(void *context, const char *message, ...) { (void)context; (void)message; }
static inline void chronicle_xml_silence(void) {
    xmlSetGenericErrorFunc(NULL, chronicle_xml_ignore);
    xmlSetStructuredErrorFunc(NULL, NULL);
}

/* xmlFree is a global variable holding a function pointer; Swift 6 refuses to read shared
   mutable state, so it is called from here. */
static inline void chronicle_xml_free(void *pointer) { xmlFree(pointer); }
#endif
