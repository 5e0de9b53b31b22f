from mrtpo.book.pages import main

main()
