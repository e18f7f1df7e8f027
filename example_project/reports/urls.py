from django.urls import path

from . import views

app_name = "reports"
urlpatterns = [
    path("", views.report_list, name="list"),
    path("reports.json", views.report_states, name="states"),
    path("reports/<int:pk>/build/", views.build_again, name="build"),
    path("reports/<int:pk>/cancel/", views.cancel_build, name="cancel"),
]
