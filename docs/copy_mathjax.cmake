# docs/copy_mathjax.cmake: copy the parts of MathJax 2 (Debian's libjs-mathjax) that the site
# uses into html/mathjax, so its formulas typeset offline and the site can be copied anywhere.
#   cmake -DMATHJAX_DIR=/usr/share/javascript/mathjax -DHTML_DIR=build/docs/html -P copy_mathjax.cmake
# What Doxygen's pages load: MathJax.js; the TeX input with the tex2jax, AMSmath and
# AMSsymbols extensions; the HTML-CSS output and its TeX fonts (about 3 MB of 54).
set(to "${HTML_DIR}/mathjax")
file(COPY "${MATHJAX_DIR}/MathJax.js" DESTINATION "${to}")
foreach(dir extensions localization/en jax/input/TeX jax/element jax/output/HTML-CSS/autoload jax/output/HTML-CSS/fonts/TeX
            fonts/HTML-CSS/TeX/woff fonts/HTML-CSS/TeX/otf)
  get_filename_component(parent "${to}/${dir}" DIRECTORY)
  file(COPY "${MATHJAX_DIR}/${dir}" DESTINATION "${parent}")
endforeach()
file(GLOB output_files "${MATHJAX_DIR}/jax/output/HTML-CSS/*.js")
file(COPY ${output_files} DESTINATION "${to}/jax/output/HTML-CSS")
